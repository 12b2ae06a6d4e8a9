"""Filler prose: deterministic pseudo-sentences that pad a prompt to a length.

Words of a billing domain, in sentences of 8 to 18, with a section heading now and then.
The vocabulary holds no plan names, no codes and no digits but the section numbers, so a
request's own facts (a plan it asks for, a code it carries, a value planted in it) are
stated only where the workload puts them.
"""

from __future__ import annotations

import random

_WORDS = (
    "ledger invoice region storage egress tenant quota replica cluster seat renewal "
    "discount migration audit latency shard archive credit refund contract backup "
    "compliance forecast capacity window incident review budget pipeline vendor usage "
    "account support escalation policy retention snapshot"
).split()


def filler(rng: random.Random, chars: int) -> str:
    """`chars` characters of prose drawn from `rng`."""
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


