"""tool-turn: the #52448 shape, a multi-turn chat whose healthy reply is one tool call.

The conversation: the user asks about an account, the assistant looked it up with a
tool, then the user asks to upgrade it to business and then cancel it. A healthy
model answers with a short `change_plan` call (~180 tokens with reasoning on the
reporter's model); the bug makes it loop in reasoning until max_tokens.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator

import orjson

from loadgen.scenario import ToolTurnWorkload
from loadgen.workload.base import WorkItem
from loadgen.workload.tokens import estimate_tokens
from loadgen.workload.tools import BILLING_TOOLS, SYSTEM_PROMPT

# The first account of every seed is the one from the original report.
REPORTED_ACCOUNT = "XEHM4B"


def account_ids(seed: int, count: int) -> list[str]:
    rng = random.Random(f"tool-turn/{seed}")
    alphabet = string.ascii_uppercase + string.digits
    ids = [REPORTED_ACCOUNT]
    while len(ids) < count:
        candidate = "".join(rng.choice(alphabet) for _ in range(6))
        if candidate not in ids:
            ids.append(candidate)
    return ids


def conversation(account: str) -> list[dict]:
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
        {"role": "user", "content": f"Please upgrade {account} to business, then cancel it."},
    ]


class ToolTurn:
    kind = "tool-turn"

    def __init__(self, cfg: ToolTurnWorkload) -> None:
        self.cfg = cfg
        self.accounts = account_ids(cfg.seed, cfg.accounts)

    def items(self) -> Iterator[WorkItem]:
        built = []
        for account in self.accounts:
            messages = conversation(account)
            chars = sum(len(m.get("content") or "") for m in messages)
            built.append(WorkItem(
                item_id=f"tool-turn/{account}", messages=messages, tools=BILLING_TOOLS,
                approx_prompt_tokens=estimate_tokens("x" * chars) + 400,
                expects_tool_call=True,
            ))
        while True:
            yield from built
