"""session: agentic conversations run the way DeepSeek-V4 agents run, every turn checked.

A session is a customer talking to a support agent that acts through tools. Early on it
plants facts only it has: the customer's made-up name and customer number, an order, and
what the order lookup returns (a tracking number, an amount). Its turns, in order:

| turn | the request ends with | a correct reply | regime |
|---|---|---|---|
| 0 | look up order X and tell me its tracking number | `lookup_order(X)` | user turn |
| 1 | the lookup's result | the tracking number | tool loop |
| 2 | "move the delivery to <a date>" | `update_delivery(X, date)` | user turn |
| 3 | the update's result | the new delivery date | tool loop |
| 4 | "what was my customer number again?" | the customer number | user turn |
| 5 | "refund the order's full amount" | `issue_refund(X, amount)` | user turn |
| 6 | the refund's result | the refund id | tool loop |
| 7 | "which name is on the account?" | the name | user turn |

The history is *recorded*, not live: each turn's prompt is the previous turn's prompt,
the correct reply to it (with its reasoning, as `reasoning_content`, which DeepSeek's API
demands back on tool-call histories), and what comes next (a tool result or the next user
message). Every run and every server then sees the same prompts, each turn has a known
answer, and one wrong turn does not change the next ones. Inside a tool loop the prompt
grows by appending (the server's prefix cache can hit all of the previous prompt); at a
new user turn DeepSeek-V4's chat template drops the reasoning before the last user
message, so the prompt is rewritten from the previous user message on.

Every session shares a long system and tools prefix (an operations handbook); sessions
take the scenario's prefix sizes in turn, so some prefixes are above 2048 tokens and
some below (vLLM #52492 showed only with a cached prefix over 2048 tokens). Between turns
a session thinks for a while (`think_time_s`): longer than a server's keep-alive, the
client must not reuse a connection the server is closing.

Each turn's expectation holds all of its session's facts, the answer this turn must give
(a known answer or a call with exact arguments), and the earlier turns' answers (`stale`):
a fact of another session is `cross_talk`, an earlier turn's answer instead of this one's
is `stale_answer`, this turn's fact wrong is `wrong_answer`.
"""

from __future__ import annotations

import datetime as dt
import random
import string
from typing import Any

import orjson

from loadgen.expectations import AnswerCheck, Expectation, ExpectedCall, is_code
from loadgen.scenario import SessionWorkload
from loadgen.workload.base import Cycled, Turn, WorkItem
from loadgen.workload.filler import filler
from loadgen.workload.known_answer import spelled_date
from loadgen.workload.tokens import DEFAULT_CHARS_PER_TOKEN, estimate_tokens

USER_TURN, TOOL_LOOP = "user-turn", "tool-loop"
SYLLABLES = ("ka", "lo", "mir", "ten", "vas", "or", "bel", "dru", "sen", "tha", "quin",
             "zel", "mar", "rok", "fen", "ul", "dav", "nis", "pra", "gol")


def _fn(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties,
                       "required": list(properties), "additionalProperties": False}}}


_ORDER = {"type": "string", "description": "The order's id, as the customer gives it."}
SESSION_TOOLS: list[dict[str, Any]] = [
    _fn("lookup_order", "Look up an order: its status, tracking number and amount.",
        {"order_id": _ORDER}),
    _fn("update_delivery", "Move an order's delivery to another date.",
        {"order_id": _ORDER, "date": {"type": "string", "description": "YYYY-MM-DD"}}),
    _fn("issue_refund", "Refund an amount of an order to the customer.",
        {"order_id": _ORDER, "amount": {"type": "integer", "description": "In cents."}}),
]
TOOLS_TOKENS = 260  # what the tools above take in a prompt, about


def handbook(tokens: int, chars_per_token: float) -> str:
    """The system prompt of every session with this prefix size: the same text each time."""
    head = ("You are the support agent of Northwind Logistics. You act on orders only "
            "through the tools you are given, one step at a time, and answer from what "
            "the customer and the tools told you. The operations handbook follows.\n\n")
    chars = max(0, int((tokens - TOOLS_TOKENS) * chars_per_token) - len(head))
    return head + filler(random.Random(f"handbook/{tokens}"), chars)


def _code(rng: random.Random, used: set[str], length: int = 8) -> str:
    alphabet = string.ascii_uppercase + string.digits
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(length))
        if is_code(value) and any(c.isalpha() for c in value) and value not in used:
            used.add(value)
            return value


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        first = "".join(rng.choice(SYLLABLES) for _ in range(2)).capitalize()
        last = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        name = f"{first} {last}"
        if name not in used and len(name) >= 8:
            used.add(name)
            return name


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}


class _Script:
    """One session's facts and its turns: (what the request ends with, the correct reply,
    the expectation's answer)."""

    def __init__(self, sid: str, rng: random.Random, used: set[str]) -> None:
        self.sid = sid
        self.name = _name(rng, used)
        self.customer = _code(rng, used)
        self.order = _code(rng, used)
        self.tracking = _code(rng, used)
        self.refund = _code(rng, used)
        while True:
            amount = str(rng.randrange(100_000, 999_999))
            if amount not in used:
                used.add(amount)
                self.amount = amount
                break
        self.delivery = dt.date(2026, 1, 5) + dt.timedelta(days=rng.randrange(600))

    @property
    def facts(self) -> dict[str, str]:
        return {"name": self.name, "customer": self.customer, "order_id": self.order,
                "tracking": self.tracking, "amount": self.amount, "refund_id": self.refund,
                "delivery_date": self.delivery.isoformat()}

    def turns(self) -> list[tuple[list[dict[str, Any]], dict[str, Any], str, Any]]:
        """Per turn: the messages that end its request, the correct reply (an assistant
        message), the regime, and its answer (a fact name or an exact call)."""
        s, sid = self, self.sid
        lookup = _call(f"call_{sid}_0", "lookup_order", {"order_id": s.order})
        update = _call(f"call_{sid}_2", "update_delivery",
                       {"order_id": s.order, "date": s.delivery.isoformat()})
        refund = _call(f"call_{sid}_5", "issue_refund",
                       {"order_id": s.order, "amount": int(s.amount)})

        def tool(call: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
            return {"role": "tool", "tool_call_id": call["id"],
                    "content": orjson.dumps(result).decode()}

        def says(text: str, reasoning: str) -> dict[str, Any]:
            return {"role": "assistant", "content": text, "reasoning_content": reasoning}

        def calls(call: dict[str, Any], reasoning: str) -> dict[str, Any]:
            return {"role": "assistant", "content": "", "reasoning_content": reasoning,
                    "tool_calls": [call]}

        user = lambda text: {"role": "user", "content": text}  # noqa: E731
        return [
            ([user(f"Hi, I'm {s.name}, customer number {s.customer}. My order {s.order} "
                   "has not arrived yet. Can you look it up and tell me its tracking "
                   "number?")],
             calls(lookup, "The customer wants the tracking number of their order. I "
                           "look the order up first."),
             USER_TURN, ("lookup_order", {"order_id": s.order})),
            ([tool(lookup, {"order_id": s.order, "status": "delayed",
                            "tracking_number": s.tracking, "amount_cents": int(s.amount),
                            "warehouse": "Bergen"})],
             says(f"Your order is delayed. Its tracking number is {s.tracking}.",
                  "The lookup returned the tracking number; I tell the customer."),
             TOOL_LOOP, "tracking"),
            ([user(f"Please move the delivery to {spelled_date(s.delivery)}.")],
             calls(update, "The customer wants a new delivery date; I update it."),
             USER_TURN, ("update_delivery", {"order_id": s.order,
                                             "date": s.delivery.isoformat()})),
            ([tool(update, {"order_id": s.order, "ok": True,
                            "delivery_date": s.delivery.isoformat()})],
             says(f"Done: the delivery is now on {s.delivery.isoformat()}.",
                  "The update went through; I confirm the new date."),
             TOOL_LOOP, "delivery_date"),
            ([user("What was my customer number again?")],
             says(f"Your customer number is {s.customer}.",
                  "The customer gave their number in their first message."),
             USER_TURN, "customer"),
            ([user("Actually, please refund the order's full amount to me.")],
             calls(refund, "A full refund: the amount is the one the lookup returned."),
             USER_TURN, ("issue_refund", {"order_id": s.order, "amount": int(s.amount)})),
            ([tool(refund, {"refund_id": s.refund, "order_id": s.order,
                            "amount_cents": int(s.amount), "status": "issued"})],
             says(f"The refund is issued; its id is {s.refund}.",
                  "The refund went through; I give the customer its id."),
             TOOL_LOOP, "refund_id"),
            ([user("Thanks. Which name is on my account?")],
             says(f"The account is in the name of {s.name}.",
                  "The customer introduced themselves at the start."),
             USER_TURN, "name"),
        ]


class Sessions(Cycled):
    kind = "session"

    def __init__(self, cfg: SessionWorkload, chars_per_token: float | None = None) -> None:
        self.cfg = cfg
        self.chars_per_token = chars_per_token or DEFAULT_CHARS_PER_TOKEN

    def _build(self) -> list[WorkItem]:
        cfg = self.cfg
        rng = random.Random(f"session/{cfg.seed}")
        used: set[str] = set()
        prefixes = {tokens: handbook(tokens, self.chars_per_token)
                    for tokens in cfg.shared_prefix_tokens}
        out: list[WorkItem] = []
        for s in range(cfg.sessions):
            sid = f"s{s}"
            script = _Script(sid, rng, used)
            prefix_tokens = cfg.shared_prefix_tokens[s % len(cfg.shared_prefix_tokens)]
            out += self._session(script, prefix_tokens, prefixes[prefix_tokens])
        return out

    def _session(self, script: _Script, prefix_tokens: int, system: str) -> list[WorkItem]:
        cfg = self.cfg
        think = random.Random(f"think/{cfg.seed}/{script.sid}")
        low, high = cfg.think_time_s
        facts = script.facts
        distinctive = tuple(facts)[:-1]  # the date is no session's alone
        history: list[dict[str, Any]] = [{"role": "system", "content": system}]
        answered: list[str] = []
        items = []
        for index, (ends, reply, regime, answer) in enumerate(script.turns()[:cfg.turns]):
            history += ends
            messages = list(history)
            if isinstance(answer, tuple):
                name, exact = answer
                expected = Expectation(facts=facts, distinctive=distinctive,
                                       call=ExpectedCall(name, {"order_id": "order_id"},
                                                         exact=exact),
                                       stale=tuple(answered))
            else:
                kind = "date" if answer == "delivery_date" else "text"
                others = tuple(n for n in facts if n != answer)
                expected = Expectation(facts=facts, distinctive=distinctive,
                                       checks=(AnswerCheck(answer, kind, others),),
                                       stale=tuple(answered))
                answered.append(answer)
            text = "".join(str(m.get("content") or "") + str(m.get("reasoning_content") or "")
                           for m in messages[1:])
            items.append(WorkItem(
                item_id=f"session/{cfg.seed}/{script.sid}/{index}", messages=messages,
                tools=SESSION_TOOLS,
                approx_prompt_tokens=prefix_tokens + estimate_tokens(text, self.chars_per_token),
                expects_tool_call=isinstance(answer, tuple), expected=expected,
                tags={"probe": "session", "turn": regime, "prefix_tokens": str(prefix_tokens)},
                turn=Turn(session=f"{cfg.seed}/{script.sid}", index=index, count=cfg.turns,
                          think_s=0.0 if index == 0 else round(think.uniform(low, high), 3))))
            history.append(reply)
        return items
