"""tool-turn: the #52448 shape, a multi-turn chat whose healthy reply is one tool call.

The conversation: the user asks about an account, the assistant looked it up with a
tool, then the user asks to change its plan and then cancel it. A healthy model
answers with a short `change_plan` call (~180 tokens with reasoning on the reporter's
model); the bug makes it loop in reasoning until max_tokens.

Two variants. `as-reported` is #52448's turn (upgrade to business; with `accounts = 1`,
the identical bodies of the report). `per-request` gives every request an account and
a plan of its own, and the last message no longer names the account ("move it to the
enterprise plan"): the model must carry the account from the start of the
conversation, and a call on another request's account or plan is told apart
(`cross_talk`, `wrong_answer`).
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator

import orjson

from loadgen.expectations import Expectation, ExpectedCall, is_code
from loadgen.scenario import ToolTurnWorkload
from loadgen.workload.base import WorkItem
from loadgen.workload.tokens import estimate_tokens
from loadgen.workload.tools import BILLING_TOOLS, SYSTEM_PROMPT

# The first account of every seed is the one from the original report. It is also the
# example in the tools' description, so every prompt carries it: it never names one
# request (it is not `distinctive`).
REPORTED_ACCOUNT = "XEHM4B"
#: Plans a per-request turn asks for (the account is on pro).
OTHER_PLANS = ("business", "enterprise", "free")


def account_ids(seed: int, count: int) -> list[str]:
    """Distinct six-character account ids (codes: letters and at least one digit)."""
    rng = random.Random(f"tool-turn/{seed}")
    alphabet = string.ascii_uppercase + string.digits
    ids = [REPORTED_ACCOUNT]
    while len(ids) < count:
        candidate = "".join(rng.choice(alphabet) for _ in range(6))
        if candidate not in ids and is_code(candidate):
            ids.append(candidate)
    return ids[:count]


def change_plan_expectation(account: str, plan: str, **facts: str) -> Expectation:
    """A turn whose healthy reply is `change_plan(account, plan)` (a lookup first is fine)."""
    distinctive = tuple(name for name, value in (("account_id", account), *facts.items())
                        if is_code(value) and value != REPORTED_ACCOUNT)
    return Expectation(
        facts={"account_id": account, "plan": plan, **facts}, distinctive=distinctive,
        call=ExpectedCall("change_plan", {"account_id": "account_id", "plan": "plan"},
                          steps=("get_account",)))


def conversation(account: str, plan: str | None = None) -> list[dict]:
    """The turn as reported (plan None: "upgrade {account} to business"), or a per-request
    one that names the account only early on and asks for `plan`."""
    lookup = orjson.dumps({"account_id": account}).decode()
    record = orjson.dumps({
        "account_id": account, "plan": "pro", "status": "active", "seats": 12,
        "renews_on": "2026-12-01", "owner": "ops@example.com",
    }).decode()
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Hi, I need help with my account {account}."},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_lookup_1", "type": "function",
                         "function": {"name": "get_account", "arguments": lookup}}]},
        {"role": "tool", "tool_call_id": "call_lookup_1", "content": record},
        {"role": "assistant",
         "content": f"I found account {account}: Pro plan, 12 seats, active, renews on "
                    "2026-12-01. What would you like to do?"},
        {"role": "user", "content": f"Please upgrade {account} to business, then cancel it."
         if plan is None else f"Please move it to the {plan} plan, then cancel it."},
    ]


class ToolTurn:
    kind = "tool-turn"

    def __init__(self, cfg: ToolTurnWorkload) -> None:
        self.cfg = cfg
        # Per request: every account names its request, so the reported one is left out.
        self.accounts = (account_ids(cfg.seed, cfg.accounts + 1)[1:]
                         if cfg.variant == "per-request" else account_ids(cfg.seed, cfg.accounts))

    def items(self) -> Iterator[WorkItem]:
        built = []
        per_request = self.cfg.variant == "per-request"
        for i, account in enumerate(self.accounts):
            plan = OTHER_PLANS[i % len(OTHER_PLANS)] if per_request else None
            messages = conversation(account, plan)
            chars = sum(len(m.get("content") or "") for m in messages)
            built.append(WorkItem(
                item_id=f"tool-turn/{account}" + (f"/{plan}" if plan else ""),
                messages=messages, tools=BILLING_TOOLS,
                approx_prompt_tokens=estimate_tokens("x" * chars) + 400,
                expects_tool_call=True,
                expected=change_plan_expectation(account, plan or "business"),
            ))
        while True:
            yield from built
