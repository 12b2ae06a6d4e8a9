"""What the toy model knows how to answer, and which words of the prompt each answer copies.

The sim's model follows a script; for the requests below it can also *solve* what is
asked, the way a model answers a known-answer probe: by copying values out of its
context (an identifier to echo, a code planted in filler, a catalog row, what a tool
returned, what the user said turns ago) or computing from them (a sum, a date some days
on, a shipment's arguments). Each value it copies is a `FactRef`: the value as the
prompt writes it and where (its character offset in the rendered prompt). The engine
turns the offset into a token position, and the position into the KV entries the value
lives in, so what the model writes depends on what its reads of those entries returned
(`engine.py`): a read of another request's entry or an entry the indexer never selected
makes it copy the value altered (`alter`), and `render` computes the answer again from
the values as read. Nothing here is random and nothing looks at a layout.

The phrasings are the load generator's known-answer and session workloads', read as a
model reads them, from the prompt alone: the sim never imports the load generator.
Requests it cannot solve keep the script of `model.py`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TEXT, DATE = "text", "date"


@dataclass(frozen=True)
class FactRef:
    """A value the answer copies from the prompt, where the prompt has it."""

    value: str
    offset: int  # character offset in the rendered prompt
    kind: str = TEXT  # DATE: written like `16 July 2025` or `2026-04-17`


@dataclass(frozen=True)
class Solution:
    """How the model answers: its reasoning, the values it copies, and the answer (or a
    tool call's arguments) computed from those values as it read them."""

    reasoning: str
    facts: tuple[FactRef, ...]
    render: Callable[[tuple[str, ...]], str]
    tool: str | None = None  # a tool call named so; `render` gives its arguments

    def answer(self) -> str:
        return self.render(tuple(f.value for f in self.facts))


# -- values as read ---------------------------------------------------------------------

_SPELLED = "%d %B %Y"


def parse_date(value: str) -> dt.date | None:
    for fmt in ("%Y-%m-%d", _SPELLED):
        try:
            return dt.datetime.strptime(value, fmt).date()
        except ValueError:
            continue
    return None


def _next_in_class(char: str, step: int) -> str:
    """Another character of the same class: a digit, a Latin capital or small letter, or
    a letter of another script (its neighbour in the code chart, still a letter)."""
    if char.isdigit() and char.isascii():
        return str((int(char) + 1 + step % 9) % 10)
    for alphabet in ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"):
        if char in alphabet:
            i = alphabet.index(char)
            return alphabet[(i + 1 + step % 25) % 26]
    for delta in (1, -1, 2, -2):
        other = chr(ord(char) + delta)
        if other.isalpha():
            return other
    return char


def alter(value: str, kind: str, seed: int) -> str:
    """`value` as a read that missed it gives it back: one character of it changed (a
    date: its day moved by one to three days). `seed` (what the read found instead)
    picks which character and what it becomes."""
    if kind == DATE:
        day = parse_date(value)
        if day is not None:
            moved = day + dt.timedelta(days=1 + seed % 3)
            return moved.isoformat() if "-" in value else moved.strftime(_SPELLED).lstrip("0")
    positions = [i for i, c in enumerate(value) if c.isalnum()]
    if not positions:
        return value
    i = positions[seed % len(positions)]
    return value[:i] + _next_in_class(value[i], seed // len(positions)) + value[i + 1:]


# -- reading the prompt -------------------------------------------------------------------


def _find(rendered: str, pattern: str, start: int = 0, flags: int = 0) -> re.Match[str] | None:
    return re.compile(pattern, flags).search(rendered, start)


def _ref(match: re.Match[str], group: int | str = 1, kind: str = TEXT) -> FactRef:
    return FactRef(match.group(group), match.start(group), kind)


def _tool_result(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    last = messages[-1] if messages else {}
    if last.get("role") != "tool":
        return None
    try:
        data = json.loads(str(last.get("content") or ""))
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def solve(messages: list[dict[str, Any]], rendered: str, ask: str) -> Solution | None:
    """The solution of a request the model knows how to answer, or None (`ask`: the
    text of the last message)."""
    ask_at = rendered.rfind(ask) if ask else -1
    if ask_at < 0:
        ask_at = 0
    result = _tool_result(messages)
    if result is not None:
        return _after_tool(result, rendered)
    for skill in (_echo, _needle, _lookup, _sum, _date, _shipment, _session_turn):
        solution = skill(rendered, ask, ask_at)
        if solution is not None:
            return solution
    return None


def _echo(rendered: str, ask: str, at: int) -> Solution | None:
    if not ask.startswith("Repeat the following identifiers exactly"):
        return None
    head = ask.find("\n\n")
    if head < 0:
        return None
    facts = []
    pos = at + head + 2
    for line in ask[head + 2:].split("\n"):
        value = line.strip()
        if value:
            facts.append(FactRef(value, rendered.find(value, pos)))
        pos += len(line) + 1
    if not facts:
        return None
    return Solution("The user wants the identifiers repeated exactly, one per line.",
                    tuple(facts), lambda values: "\n".join(values))


def _needle(rendered: str, ask: str, at: int) -> Solution | None:
    m = re.search(r"What is the access code of vault ([a-z ]+)\?", ask)
    if m is None:
        return None
    vault = m.group(1)
    planted = _find(rendered, rf"The access code of vault {re.escape(vault)} is (\d+)\.")
    if planted is None:
        return None
    return Solution(f"I need the access code of vault {vault} from the text.",
                    (_ref(planted),),
                    lambda v: f"The access code of vault {vault} is {v[0]}.")


def _lookup(rendered: str, ask: str, at: int) -> Solution | None:
    m = re.search(r"What is the code of the ([a-z ]+)\?", ask)
    if m is None:
        return None
    item = m.group(1)
    row = _find(rendered, rf"\| {re.escape(item)} \| (\S+) \|")
    if row is None:
        return None
    return Solution(f"I look up the {item} in the catalog.", (_ref(row),),
                    lambda v: f"The code of the {item} is {v[0]}.")


def _sum(rendered: str, ask: str, at: int) -> Solution | None:
    m = _find(rendered, r"Add these invoice amounts and give the total: ([\d, ]+)\.", at)
    if m is None:
        return None
    facts = tuple(FactRef(n.group(0), m.start(1) + n.start())
                  for n in re.finditer(r"\d+", m.group(1)))
    return Solution("I add the amounts one by one.", facts,
                    lambda v: f"The total is {sum(int(x) for x in v)}.")


def _date(rendered: str, ask: str, at: int) -> Solution | None:
    m = _find(rendered, r"What is the date (\d+) days after (\d{1,2} [A-Z][a-z]+ \d{4})\?", at)
    if m is None:
        return None
    days = int(m.group(1))

    def render(v: tuple[str, ...]) -> str:
        base = parse_date(v[0])
        return f"It is {(base + dt.timedelta(days=days)).isoformat()}." if base else v[0]

    return Solution(f"I count {days} days on from the date given.", (_ref(m, 2, DATE),),
                    render)


def _shipment(rendered: str, ask: str, at: int) -> Solution | None:
    m = _find(rendered, r"Create the shipment for order (\w+): (.+?), to be delivered (\d+) "
              r"days after (\d{1,2} [A-Z][a-z]+ \d{4}), to (\d+ [^,]+), (\w+)\. Use "
              r"(express|standard)", at)
    if m is None:
        return None
    lines = [(q.group(1), q.group(2), m.start(2) + q.start(1), m.start(2) + q.start(2))
             for q in re.finditer(r"(\d+) units of (SKU-\d+)", m.group(2))]
    days, express = int(m.group(3)), m.group(7) == "express"
    facts = [_ref(m, 1)]
    for qty, sku, q_at, s_at in lines:
        facts += [FactRef(qty, q_at), FactRef(sku, s_at)]
    facts += [_ref(m, 4, DATE), _ref(m, 5), _ref(m, 6)]

    def render(v: tuple[str, ...]) -> str:
        order, rest = v[0], v[1:]
        items = [{"sku": rest[2 * k + 1], "quantity": int(rest[2 * k])}
                 for k in range(len(lines))]
        base, street, city = rest[2 * len(lines):]
        day = parse_date(base)
        return json.dumps({"order_id": order, "items": items,
                           "deliver_by": (day + dt.timedelta(days=days)).isoformat()
                           if day else base,
                           "address": {"street": street, "city": city}, "express": express})

    return Solution("I create the shipment with the order's lines, date and address.",
                    tuple(facts), render, tool="create_shipment")


def _first_user(rendered: str) -> int:
    return max(rendered.find("\nuser: "), 0)


def _session_turn(rendered: str, ask: str, at: int) -> Solution | None:
    start = _first_user(rendered)
    order = _find(rendered, r"[Mm]y order ([A-Z0-9]+)", start)
    if re.search(r"look it up", ask) and order is not None:
        return Solution("The customer wants their order looked up.", (_ref(order),),
                        lambda v: json.dumps({"order_id": v[0]}), tool="lookup_order")
    moved = re.search(r"move the delivery to (\d{1,2} [A-Z][a-z]+ \d{4})", ask)
    if moved is not None and order is not None:
        date = FactRef(moved.group(1), at + moved.start(1), DATE)

        def render_update(v: tuple[str, ...]) -> str:
            day = parse_date(v[1])
            return json.dumps({"order_id": v[0], "date": day.isoformat() if day else v[1]})

        return Solution("The customer wants the delivery moved; I update it.",
                        (_ref(order), date), render_update, tool="update_delivery")
    if "customer number again" in ask:
        number = _find(rendered, r"customer number ([A-Z0-9]+)", start)
        if number is not None:
            return Solution("The customer gave their number in their first message.",
                            (_ref(number),), lambda v: f"Your customer number is {v[0]}.")
    if "refund the order's full amount" in ask:
        amount = _find(rendered, r'"amount_cents":\s*(\d+)', start)
        if amount is not None and order is not None:
            return Solution("A full refund of the amount the lookup returned.",
                            (_ref(order), _ref(amount)),
                            lambda v: json.dumps({"order_id": v[0], "amount": int(v[1])}),
                            tool="issue_refund")
    if "Which name is on my account" in ask:
        name = _find(rendered, r"I'm ([A-Z][a-z]+ [A-Z][a-z]+)", start)
        if name is not None:
            return Solution("The customer introduced themselves at the start.",
                            (_ref(name),), lambda v: f"The account is in the name of {v[0]}.")
    return None


def _saying(template: str) -> Callable[[tuple[str, ...]], str]:
    return lambda values: template.format(values[0])


def _after_tool(result: dict[str, Any], rendered: str) -> Solution | None:
    """A tool returned: say what the customer asked for from its result."""
    at = rendered.rfind("\ntool: ")
    for key, say in (("tracking_number", "Your order is delayed. Its tracking number is {}."),
                     ("refund_id", "The refund is issued; its id is {}."),
                     ("delivery_date", "Done: the delivery is now on {}.")):
        value = result.get(key)
        if isinstance(value, str):
            m = _find(rendered, rf'"{key}":\s*"({re.escape(value)})"', max(at, 0))
            if m is None:
                return None
            kind = DATE if key == "delivery_date" else TEXT
            return Solution(f"The tool returned the {key.replace('_', ' ')}.",
                            (_ref(m, 1, kind),), _saying(say))
    return None
