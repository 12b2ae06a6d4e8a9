"""Servers that answer the known-answer and session workloads, honestly or corrupted.

Scripts for the fake server (`FakeOpenAI.script`). Each finds the request's item in the
workload the run sends (`Oracle`: the load generator's own workload, built from the same
scenario) and writes a reply from the item's known answer:

- `honest(seed)`: the right value in free wording: templates of several shapes, numbers
  grouped in several ways, dates in several formats, a tool call with its list in another
  order, a quantity as a string, a date with a time, a word in another case;
- `broken(family)`: the same wordings around a corrupted answer, every reply corrupted:
  - `substitute`, `delete`, `transpose`, `duplicate`: one edit of one character of the
    answer, at a position that moves on with every request (so a run covers them all);
  - `paraphrase`: a reworded sentence around a value one digit or letter off;
  - `another`: another request's (another session's) value of the same fact;
  - `stale`: a session turn answered with an earlier turn's answer;
  - `call`: one leaf of a computed call's arguments changed, dropped or doubled.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
from collections.abc import Callable
from typing import Any

from loadgen.expectations import Expectation, is_distinctive
from loadgen.scenario import Scenario
from loadgen.workload import make_workload
from loadgen.workload.base import WorkItem
from loadgen.workload.mix import first_cycle
from tests.support.openai_fake import FakeOpenAI

Script = Callable[[dict[str, Any], FakeOpenAI], dict[str, Any]]
EDITS = ("substitute", "delete", "transpose", "duplicate")
BROKEN_FAMILIES = (*EDITS, "paraphrase", "another", "stale", "call")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


class Oracle:
    """The items of the workload a run sends, found from a request's body."""

    def __init__(self, workload: dict[str, Any]) -> None:
        scenario = Scenario.model_validate({"workload": workload})
        self.items = first_cycle(make_workload(scenario).items())
        self._by_body = {self._key(i.messages): i for i in self.items}
        self._by_value: dict[str, WorkItem] = {}
        for item in self.items:
            exp = item.expected
            if exp is not None and item.turn is None:
                for name in exp.distinctive:
                    self._by_value.setdefault(exp.facts[name], item)

    @staticmethod
    def _key(messages: list[dict[str, Any]]) -> tuple[int, str, str]:
        """What tells a request apart whatever the server's tokenizer made of the filler
        (a session's system prompt is sized by it): its length, its first user message
        (a session's own facts) and its last message."""
        first = next((_text(m) for m in messages if m.get("role") == "user"), "")
        return len(messages), first, _text(messages[-1])

    def item(self, body: dict[str, Any]) -> WorkItem:
        messages = body["messages"]
        found = self._by_body.get(self._key(messages))
        if found is not None:
            return found
        last = _text(messages[-1])  # a needle's filler follows the server's tokenizer
        for value, item in self._by_value.items():
            if value in last and item.tags.get("probe") == "needle":
                return item
        raise KeyError("a request the oracle does not know")

    def same_fact_elsewhere(self, item: WorkItem, fact: str) -> str | None:
        """Another item's value of the same fact (another session's, another row's)."""
        for other in self.items:
            exp = other.expected
            if other.item_id != item.item_id and exp is not None and fact in exp.facts \
                    and (item.turn is None or other.turn is None
                         or other.turn.session != item.turn.session):
                value = exp.facts[fact]
                assert item.expected is not None
                if value != item.expected.facts.get(fact) and is_distinctive(value):
                    return value
        return None


# -- writing a value ---------------------------------------------------------------------

def _number_form(value: str, rng: random.Random) -> str:
    n = int(value)
    grouped = f"{n:,}"
    return rng.choice([str(n), grouped, grouped.replace(",", " "), grouped.replace(",", "."),
                       f"{n}.00", f"${grouped}", grouped.replace(",", "\u202f")])


def _date_form(value: str, rng: random.Random) -> str:
    day = dt.date.fromisoformat(value)
    return rng.choice([day.isoformat(), day.strftime("%B %d, %Y"), f"{day.day} {day:%B %Y}",
                       day.strftime("%A, %d %B %Y"), day.strftime("%d.%m.%Y")])


def written(value: str, kind: str, rng: random.Random) -> str:
    if kind == "number":
        return _number_form(value, rng)
    if kind == "date":
        return _date_form(value, rng)
    return value


SENTENCES = (
    "{v}",
    "The answer is {v}.",
    "Sure! Here it is: `{v}`",
    "Based on what you gave me, it is **{v}**.\n\nLet me know if you need anything else.",
    "That would be {v} — happy to help further.",
    "Looking back at our conversation: {v}.",
)


def _prose(values: list[tuple[str, str]], rng: random.Random, template: str | None = None
           ) -> str:
    if len(values) > 1:
        lead = rng.choice(["", "Here they are:\n\n", "As requested:\n"])
        bullet = rng.choice(["", "- ", "* "])
        return lead + "\n".join(f"{bullet}{written(v, k, rng)}" for v, k in values)
    value, kind = values[0]
    return (template or rng.choice(SENTENCES)).format(v=written(value, kind, rng))


def _honest_arguments(args: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    out = copy.deepcopy(args)
    for key, value in out.items():
        if isinstance(value, list) and len(value) > 1:
            rng.shuffle(value)
        if isinstance(value, list):
            for line in value:
                if isinstance(line, dict) and isinstance(line.get("quantity"), int) \
                        and rng.random() < 0.3:
                    line["quantity"] = str(line["quantity"])
        if isinstance(value, str) and len(value) == 10 and value[4] == "-" \
                and rng.random() < 0.3:
            out[key] = value + "T00:00:00Z"
        if isinstance(value, dict) and "city" in value and rng.random() < 0.3:
            value["city"] = value["city"].upper()
    return out


def _call_reply(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"reasoning": f"I call {name} with what the request says.",
            "tool_calls": [{"id": "call-1", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}],
            "finish_reason": "tool_calls"}


def _answer(content: str) -> dict[str, Any]:
    return {"reasoning": "The answer is in the conversation.", "content": content,
            "finish_reason": "stop"}


def _checked(exp: Expectation) -> list[tuple[str, str]]:
    return [(exp.facts[c.fact], c.kind) for c in exp.checks]


def _call_arguments(exp: Expectation) -> dict[str, Any]:
    assert exp.call is not None
    if exp.call.exact is not None:
        return exp.call.exact
    return {key: exp.facts[fact] for key, fact in exp.call.arguments.items()}


def honest(oracle: Oracle, seed: int = 0) -> Script:
    def script(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
        rng = random.Random(f"honest/{seed}/{len(fake.seen)}")
        exp = oracle.item(body).expected
        assert exp is not None
        if exp.call is not None:
            return _call_reply(exp.call.name, _honest_arguments(_call_arguments(exp), rng))
        return _answer(_prose(_checked(exp), rng))
    return script


# -- corrupting a value --------------------------------------------------------------------

def _other_char(char: str, rng: random.Random) -> str:
    pools = ("0123456789", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
    for pool in pools:
        if char in pool:
            return rng.choice([c for c in pool if c != char])
    for delta in (1, -1, 2):
        if chr(ord(char) + delta).isalpha():
            return chr(ord(char) + delta)
    return "x" if char != "x" else "y"


def edit(value: str, kind: str, at: int, rng: random.Random) -> str:
    """`value` with one edit of `kind` at position `at` (mod its length)."""
    i = at % len(value)
    if kind == "substitute":
        return value[:i] + _other_char(value[i], rng) + value[i + 1:]
    if kind == "delete":
        return value[:i] + value[i + 1:] if len(value) > 1 else value + value
    if kind == "duplicate":
        return value[:i] + value[i] + value[i:]
    j = min(i + 1, len(value) - 1)  # transpose with the next differing character
    while j < len(value) and value[j] == value[i]:
        j += 1
    if j >= len(value):
        return edit(value, "substitute", at, rng)
    return value[:i] + value[j] + value[i + 1:j] + value[i] + value[j + 1:]


def _corrupt_value(value: str, kind: str, family: str, at: int, rng: random.Random) -> str:
    if kind == "date":
        day = dt.date.fromisoformat(value)
        return (day + dt.timedelta(days=1 + at % 3)).isoformat()
    if family in EDITS:
        return edit(value, family, at, rng)
    return edit(value, "substitute", at, rng)  # paraphrase: one character off


def _mutate_leaf(args: Any, at: int, rng: random.Random) -> Any:
    """One leaf of an argument object changed (the `at`-th, in walking order)."""
    leaves: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(value, dict | list):
                walk(value)
            else:
                leaves.append((node, key))

    out = copy.deepcopy(args)
    walk(out)
    node, key = leaves[at % len(leaves)]
    value = node[key]
    if isinstance(value, bool):
        node[key] = not value
    elif isinstance(value, int):
        node[key] = value + 1
    elif isinstance(value, str) and len(value) == 10 and value[4] == "-":
        node[key] = (dt.date.fromisoformat(value) + dt.timedelta(days=1)).isoformat()
    else:
        node[key] = edit(str(value), "substitute", at, rng)
    return out


def broken(oracle: Oracle, family: str) -> Script:
    def script(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
        at = len(fake.seen)
        rng = random.Random(f"broken/{family}/{at}")
        item = oracle.item(body)
        exp = item.expected
        assert exp is not None
        if exp.call is not None:
            args = _call_arguments(exp)
            if family == "another":
                other = oracle.same_fact_elsewhere(item, "order_id")
                args = {**args, **({"order_id": other} if other else {})}
            else:
                args = _mutate_leaf(args, at, rng)
            return _call_reply(exp.call.name, args)
        values = _checked(exp)
        k = at % len(values)
        value, kind = values[k]
        fact = exp.checks[k].fact
        if family == "another":
            wrong = oracle.same_fact_elsewhere(item, fact) or _corrupt_value(
                value, kind, "substitute", at, rng)
        elif family == "stale" and exp.stale:
            wrong = exp.facts[exp.stale[-1]]
            kind = "date" if len(wrong) == 10 and wrong[4] == "-" else "text"
        else:
            wrong = _corrupt_value(value, kind, family, at, rng)
        values[k] = (wrong, kind if kind != "number" or wrong.isdigit() else "text")
        template = ("I believe the figure you want is {v}, if I read it right."
                    if family == "paraphrase" else None)
        return _answer(_prose(values, rng, template))
    return script
