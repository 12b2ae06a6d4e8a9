"""long-context: documents padded to a spread of context lengths.

The C128A bug needs a batch whose requests have very different lengths (the packed
row width follows the longest one), so each item draws its target length from the
scenario's list. Text is deterministic pseudo-prose from a seeded generator; its
length in tokens is estimated, or calibrated on the server's /tokenize.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from loadgen.scenario import LongContextWorkload
from loadgen.workload.base import WorkItem
from loadgen.workload.tokens import DEFAULT_CHARS_PER_TOKEN
from loadgen.workload.tool_turn import account_ids
from loadgen.workload.tools import BILLING_TOOLS, SYSTEM_PROMPT

_WORDS = (
    "ledger invoice region storage egress tenant quota replica cluster seat renewal "
    "discount migration audit latency shard archive credit refund contract backup "
    "compliance forecast capacity window incident review budget pipeline vendor usage "
    "account plan business enterprise support escalation policy retention snapshot"
).split()


def _document(rng: random.Random, chars: int) -> str:
    parts: list[str] = []
    size = 0
    section = 1
    while size < chars:
        sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 18)))
        line = f"{sentence.capitalize()}."
        if rng.random() < 0.08:
            line = f"\n\nSection {section}. {line}"
            section += 1
        parts.append(line)
        size += len(line) + 1
    return " ".join(parts)[:chars]


class LongContext:
    kind = "long-context"
    # Distinct documents generated before the sequence repeats.
    CYCLE = 64

    def __init__(self, cfg: LongContextWorkload, chars_per_token: float | None = None) -> None:
        self.cfg = cfg
        self.chars_per_token = chars_per_token or DEFAULT_CHARS_PER_TOKEN

    def items(self) -> Iterator[WorkItem]:
        cfg = self.cfg
        accounts = account_ids(cfg.seed, 16)
        while True:
            rng = random.Random(f"long-context/{cfg.seed}")
            for i in range(self.CYCLE):
                target = rng.choices(cfg.context_tokens, weights=cfg.weights)[0]
                account = accounts[i % len(accounts)]
                doc = _document(random.Random(f"doc/{cfg.seed}/{i}"),
                                int(target * self.chars_per_token))
                # With tools, an explicit instruction: the healthy reply is a change_plan
                # call, so a reply without one is a broken turn, not a judgement call.
                question = (
                    f"Above is the billing history of account {account}. Upgrade {account} "
                    "to the business plan now." if cfg.tools else
                    f"Above is the billing history of account {account}. Summarize its "
                    "usage in three sentences."
                )
                messages = [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": f"{doc}\n\n{question}"},
                ]
                yield WorkItem(
                    item_id=f"long-context/{cfg.seed}/{i}/{target}",
                    messages=messages,
                    tools=BILLING_TOOLS if cfg.tools else None,
                    approx_prompt_tokens=target,
                    expects_tool_call=cfg.tools,
                )
