"""known-answer: requests whose every answer is known in advance and checked exactly.

The users who caught this bug family caught it with answers they could check (vLLM
#53257: identifiers echoed back, 2% altered at temperature 0; #55927: a needle in a long
prompt returned with one wrong digit whenever the prompt length was 3 mod 4, reasoning
off; eight concurrent catalog lookups that returned other items' codes). Each family
here is one of those probes, every request with values of its own:

- **echo**: three identifiers of varied lengths and alphabets (Latin with `-` and `_`,
  hex, Greek, Cyrillic, Han, base32), to be repeated exactly;
- **needle**: a ten-digit access code planted in filler prose at a depth of the
  scenario's, in prompts of the scenario's lengths, each length sent in four variants one
  filler word apart (so the prompt lengths cover every residue mod 4);
- **lookup**: a catalog of the same items in every request, each request's with codes of
  its own, asked for one row's code; requests in flight together ask for different rows;
- **computed**: a sum of invoice amounts, a date some days after another, and a
  shipment tool call whose every argument (an order id, a list of items with
  quantities, a date, a nested address, a flag) follows from the request.

Each family is sent with reasoning on and off (`reasoning`), through the chat
template's switch (`request.reasoning_switch`). The record keeps the answer
(`expected`): the judge checks it by its kind (`judge.reply.known_answers`), so a corruption
of any shape fails, and free wording around the right value passes.
"""

from __future__ import annotations

import datetime as dt
import random
import string
from collections.abc import Callable
from typing import Any

from loadgen.expectations import AnswerCheck, Expectation, ExpectedCall, is_code
from loadgen.scenario import KnownAnswerWorkload
from loadgen.workload.base import Cycled, WorkItem
from loadgen.workload.filler import filler
from loadgen.workload.tokens import DEFAULT_CHARS_PER_TOKEN, estimate_tokens

SYSTEM_PROMPT = ("You are a careful assistant. Answer exactly what is asked, using only "
                 "the information in the conversation.")

#: Alphabets of the echoed identifiers: each probe mixes three of them.
ECHO_ALPHABETS: tuple[str, ...] = (
    string.ascii_letters + string.digits + "-_",
    "0123456789abcdef",
    "αβγδεζηθικλμνξπρστφχψω" + string.digits,
    "бвгджзийклмнпрстфхцчшщ" + string.digits,
    "東京大阪名古屋札幌福岡神戸横浜仙台広島",
    string.ascii_uppercase + "234567",
)
ECHO_LENGTHS = (6, 9, 13, 18)

#: The items of every catalog (every request's catalog lists the same items).
CATALOG_ITEMS = tuple(f"{colour} {thing}" for thing in (
    "lamp", "chair", "kettle", "desk", "shelf", "rug", "clock", "mirror", "stool", "vase",
    "bench", "cabinet") for colour in ("amber", "cobalt", "ivory", "slate", "olive",
                                       "crimson", "teal", "umber"))
VAULT_WORDS = (("amber", "silent", "northern", "hollow", "crimson", "quiet", "iron",
                "golden"), ("heron", "falcon", "otter", "lynx", "badger", "raven",
                            "marten", "ibis"))
CITIES = ("Bergen", "Lisbon", "Tallinn", "Porto", "Leipzig", "Gdansk", "Aarhus", "Bilbao")
STREETS = ("Harbour Lane", "Mill Road", "Quay Street", "Station Avenue", "Orchard Way",
           "Canal Street")

SHIPMENT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "create_shipment",
        "description": "Create a shipment for an order.",
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "The order's id."},
                "items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string"},
                                   "quantity": {"type": "integer"}},
                    "required": ["sku", "quantity"], "additionalProperties": False}},
                "deliver_by": {"type": "string", "description": "Date, YYYY-MM-DD."},
                "address": {"type": "object",
                            "properties": {"street": {"type": "string"},
                                           "city": {"type": "string"}},
                            "required": ["street", "city"], "additionalProperties": False},
                "express": {"type": "boolean"},
            },
            "required": ["order_id", "items", "deliver_by", "address", "express"],
            "additionalProperties": False,
        },
    },
}


def spelled_date(day: dt.date) -> str:
    """A date as a request writes it in prose: 14 March 2026."""
    return f"{day.day} {day:%B} {day.year}"


class _Values:
    """Values unique in a run: every identifier, code and number drawn once."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"known-answer/{seed}")
        self._used: set[str] = set()

    def unique(self, draw: Callable[[random.Random], str]) -> str:
        while True:
            value = draw(self.rng)
            if value not in self._used:
                self._used.add(value)
                return value

    def identifier(self, alphabet: str, length: int) -> str:
        def draw(rng: random.Random) -> str:
            chars = [rng.choice(alphabet) for _ in range(length)]
            inner = [c for c in alphabet if c.isalnum()]
            chars[0], chars[-1] = rng.choice(inner), rng.choice(inner)
            return "".join(chars)
        return self.unique(draw)

    def code(self, length: int = 8) -> str:
        alphabet = string.ascii_uppercase + string.digits

        def draw(rng: random.Random) -> str:
            while True:
                value = "".join(rng.choice(alphabet) for _ in range(length))
                if is_code(value) and any(c.isalpha() for c in value):
                    return value
        return self.unique(draw)

    def digits(self, count: int) -> str:
        return self.unique(lambda rng: str(rng.randrange(10 ** (count - 1), 10 ** count)))


class KnownAnswer(Cycled):
    kind = "known-answer"
    #: Requests of each family in a cycle without needles (with them: the needle sweep's
    #: size, so every family has as many).
    PER_FAMILY = 48

    def __init__(self, cfg: KnownAnswerWorkload, chars_per_token: float | None = None) -> None:
        self.cfg = cfg
        self.chars_per_token = chars_per_token or DEFAULT_CHARS_PER_TOKEN

    # -- the cycle ----------------------------------------------------------------------

    def _modes(self) -> list[bool]:
        return [mode == "on" for mode in self.cfg.reasoning]

    def _needle_sweep(self) -> list[tuple[int, int, float, bool]]:
        """(length, extra filler words, depth, reasoning) of every needle request."""
        cfg = self.cfg
        return [(length, extra, depth, reasoning) for length in cfg.needle_tokens
                for extra in range(4) for depth in cfg.needle_depths
                for reasoning in self._modes()]

    def _build(self) -> list[WorkItem]:
        cfg = self.cfg
        values = _Values(cfg.seed)
        sweep = self._needle_sweep() if "needle" in cfg.probes else []
        per_family = len(sweep) or self.PER_FAMILY
        queues: dict[str, list[WorkItem]] = {}
        modes = self._modes()
        for family in cfg.probes:
            if family == "needle":
                queues[family] = [self._needle(values, i, *step)
                                  for i, step in enumerate(sweep)]
                continue
            make = {"echo": self._echo, "lookup": self._lookup,
                    "computed": self._computed}[family]
            queues[family] = [make(values, i, modes[i % len(modes)])
                              for i in range(per_family)]
        # Families interleaved, so requests in flight together differ in kind and row.
        return [queues[family][i] for i in range(per_family) for family in cfg.probes]

    def _item(self, family: str, i: int, reasoning: bool, messages: list[dict[str, Any]],
              expected: Expectation, tools: list[dict[str, Any]] | None = None,
              tokens: int | None = None, suffix: str = "") -> WorkItem:
        text = "".join(str(m.get("content") or "") for m in messages)
        return WorkItem(
            item_id=f"known-answer/{self.cfg.seed}/{family}/{i}{suffix}",
            messages=messages, tools=tools,
            approx_prompt_tokens=tokens or estimate_tokens(text, self.chars_per_token) + (
                300 if tools else 0),
            expects_tool_call=tools is not None, expected=expected,
            reasoning=reasoning, tags={"probe": family})

    @staticmethod
    def _chat(user: str) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    # -- the families -------------------------------------------------------------------

    def _echo(self, values: _Values, i: int, reasoning: bool) -> WorkItem:
        rng = random.Random(f"echo/{self.cfg.seed}/{i}")
        alphabets = rng.sample(ECHO_ALPHABETS, 3)
        ids = [values.identifier(a, rng.choice(ECHO_LENGTHS)) for a in alphabets]
        names = [f"id{k + 1}" for k in range(len(ids))]
        facts = dict(zip(names, ids, strict=True))
        user = ("Repeat the following identifiers exactly as written, in order, one per "
                "line, and add nothing else:\n\n" + "\n".join(ids))
        expected = Expectation(
            facts=facts, distinctive=tuple(names),
            checks=tuple(AnswerCheck(n, "text", tuple(m for m in names if m != n))
                         for n in names))
        return self._item("echo", i, reasoning, self._chat(user), expected)

    def _needle(self, values: _Values, i: int, length: int, extra: int, depth: float,
                reasoning: bool) -> WorkItem:
        rng = random.Random(f"needle/{self.cfg.seed}/{i}")
        vault = f"{rng.choice(VAULT_WORDS[0])} {rng.choice(VAULT_WORDS[1])}"
        code = values.digits(10)
        needle = f"The access code of vault {vault} is {code}."
        question = (f"What is the access code of vault {vault}? Reply with the access "
                    "code.")
        chars = max(0, int(length * self.chars_per_token) - len(needle) - len(question) - 8)
        text = filler(random.Random(f"needle-doc/{self.cfg.seed}/{length}"), chars)
        cut = text.rfind(". ", 0, int(len(text) * depth)) + 1 if depth > 0 else 0
        padding = " ledger" * extra
        body = f"{text[:cut]} {needle} {text[cut:]}{padding}".strip()
        expected = Expectation(facts={"code": code, "vault": vault}, distinctive=("code",),
                               checks=(AnswerCheck("code", "text", ("vault",)),))
        return self._item("needle", i, reasoning, self._chat(f"{body}\n\n{question}"),
                          expected, tokens=length + extra,
                          suffix=f"/{length}+{extra}/d{depth:g}")

    def _lookup(self, values: _Values, i: int, reasoning: bool) -> WorkItem:
        rng = random.Random(f"lookup/{self.cfg.seed}/{i}")
        rows = list(CATALOG_ITEMS[:self.cfg.catalog_rows])
        # Requests next to each other ask for different items (rows in a shuffled order).
        wanted = rows[(i * 7 + 3) % len(rows)]
        rng.shuffle(rows)
        codes = [values.code() for _ in rows]
        asked = rows.index(wanted)
        table = "\n".join(f"| {item} | {code} | {rng.randrange(9, 400)}.{rng.randrange(100):02d} |"
                          for item, code in zip(rows, codes, strict=True))
        user = ("Catalog:\n\n| item | code | price (EUR) |\n|---|---|---|\n" + table +
                f"\n\nWhat is the code of the {rows[asked]}? Reply with the code.")
        expected = Expectation(facts={"code": codes[asked], "item": rows[asked]},
                               distinctive=("code",),
                               checks=(AnswerCheck("code", "text", ("item",)),))
        return self._item("lookup", i, reasoning, self._chat(user), expected)

    def _computed(self, values: _Values, i: int, reasoning: bool) -> WorkItem:
        kind = ("sum", "date", "call")[i % 3]
        rng = random.Random(f"computed/{self.cfg.seed}/{i}")
        if kind == "sum":
            amounts = [rng.randrange(1000, 999_999) for _ in range(rng.randint(3, 5))]
            total = sum(amounts)
            names = [f"amount{k + 1}" for k in range(len(amounts))]
            user = ("Add these invoice amounts and give the total: "
                    + ", ".join(map(str, amounts)) + ".")
            expected = Expectation(
                facts={"total": str(total), **dict(zip(names, map(str, amounts),
                                                       strict=True))},
                checks=(AnswerCheck("total", "number", tuple(names)),))
            return self._item("computed", i, reasoning, self._chat(user), expected,
                              suffix="/sum")
        base = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(1500))
        days = rng.randint(17, 400)
        target = base + dt.timedelta(days=days)
        if kind == "date":
            user = f"What is the date {days} days after {spelled_date(base)}? Give the date."
            expected = Expectation(facts={"date": target.isoformat(),
                                          "base": base.isoformat()},
                                   checks=(AnswerCheck("date", "date", ("base",)),))
            return self._item("computed", i, reasoning, self._chat(user), expected,
                              suffix="/date")
        order = values.code(8)
        skus = [f"SKU-{values.digits(5)}" for _ in range(rng.randint(1, 3))]
        quantities = [rng.randint(1, 12) for _ in skus]
        street = f"{rng.randint(2, 180)} {rng.choice(STREETS)}"
        city = rng.choice(CITIES)
        express = rng.random() < 0.5
        lines = " and ".join(f"{q} units of {sku}" for q, sku in
                             zip(quantities, skus, strict=True))
        user = (f"Create the shipment for order {order}: {lines}, to be delivered {days} "
                f"days after {spelled_date(base)}, to {street}, {city}. Use "
                f"{'express' if express else 'standard (not express)'} shipping.")
        exact = {"order_id": order,
                 "items": [{"sku": s, "quantity": q} for s, q in
                           zip(skus, quantities, strict=True)],
                 "deliver_by": target.isoformat(),
                 "address": {"street": street, "city": city}, "express": express}
        expected = Expectation(facts={"order_id": order}, distinctive=("order_id",),
                               call=ExpectedCall("create_shipment",
                                                 {"order_id": "order_id"}, exact=exact))
        return self._item("computed", i, reasoning, self._chat(user), expected,
                          tools=[SHIPMENT_TOOL], suffix="/call")
