"""long-context: documents padded to a spread of context lengths.

The C128A bug needs a batch whose requests have very different lengths (the packed
row width follows the longest one), so each item draws its target length from the
scenario's list. Text is deterministic pseudo-prose from a seeded generator; its
length in tokens is estimated, or calibrated on the server's /tokenize.

Every document carries facts only its request can answer, stated once, in its first
line (`Billing history of account K7Q2ZD, contract NW481302.`), and the question at the
end does not repeat them: a long document's facts reach the answer only through the
compressed (C128A) path, not through the recent window. With tools the request asks to
move "the account whose billing history is above" to a plan of its own; without, to
state the account id and the contract number. The record keeps what a correct reply
contains (`expected`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from loadgen.expectations import Expectation
from loadgen.scenario import LongContextWorkload
from loadgen.workload.base import WorkItem
from loadgen.workload.filler import filler
from loadgen.workload.tokens import DEFAULT_CHARS_PER_TOKEN
from loadgen.workload.tool_turn import OTHER_PLANS, account_ids, change_plan_expectation
from loadgen.workload.tools import BILLING_TOOLS, SYSTEM_PROMPT


def contract_numbers(seed: int, count: int) -> list[str]:
    """Distinct contract numbers, codes of the shape NW481302."""
    rng = random.Random(f"contracts/{seed}")
    numbers: list[str] = []
    while len(numbers) < count:
        candidate = f"NW{rng.randrange(10**6):06d}"
        if candidate not in numbers:
            numbers.append(candidate)
    return numbers


def question(plan: str | None) -> str:
    """What the request asks at the end of its document (None: no tools, an answer)."""
    if plan is not None:
        return f"Move the account whose billing history is above to the {plan} plan now."
    return ("State the account id and the contract number of the account above, then "
            "summarize its usage in three sentences.")


class LongContext:
    kind = "long-context"
    # Distinct documents generated before the sequence repeats.
    CYCLE = 64

    def __init__(self, cfg: LongContextWorkload, chars_per_token: float | None = None) -> None:
        self.cfg = cfg
        self.chars_per_token = chars_per_token or DEFAULT_CHARS_PER_TOKEN

    def items(self) -> Iterator[WorkItem]:
        cfg = self.cfg
        # One account and one contract per document; the reported account (every
        # prompt's tool description names it) is left out, so each names its request.
        accounts = account_ids(cfg.seed, self.CYCLE + 1)[1:]
        contracts = contract_numbers(cfg.seed, self.CYCLE)
        while True:
            rng = random.Random(f"long-context/{cfg.seed}")
            for i in range(self.CYCLE):
                target = rng.choices(cfg.context_tokens, weights=cfg.weights)[0]
                account, contract = accounts[i], contracts[i]
                head = f"Billing history of account {account}, contract {contract}."
                doc = filler(random.Random(f"doc/{cfg.seed}/{i}"),
                                max(0, int(target * self.chars_per_token) - len(head) - 1))
                # With tools, an explicit instruction: the healthy reply is a change_plan
                # call, so a reply without one is a broken turn, not a judgement call.
                plan = OTHER_PLANS[i % len(OTHER_PLANS)] if cfg.tools else None
                messages = [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": f"{head} {doc}\n\n{question(plan)}"},
                ]
                expected = (change_plan_expectation(account, plan, contract=contract)
                            if plan is not None else
                            Expectation(facts={"account_id": account, "contract": contract},
                                        distinctive=("account_id", "contract"),
                                        answer=("account_id", "contract")))
                yield WorkItem(
                    item_id=f"long-context/{cfg.seed}/{i}/{target}",
                    messages=messages,
                    tools=BILLING_TOOLS if cfg.tools else None,
                    approx_prompt_tokens=target,
                    expects_tool_call=cfg.tools,
                    expected=expected,
                )
