"""mix: several workloads in one run, each its share of the requests.

Parts are interleaved by *unit*: one request, or a whole session (its turns are sent in
order by one worker, so they are never split between parts). The next unit comes from
the part furthest below its share of the requests sent so far (ties: the first part), so
the shares hold from the first requests on, whatever the units' sizes.

One cycle of the mix runs until every part has sent at least one whole cycle of its own;
a part whose cycle is shorter repeats within it, its repeats named apart (`#2`, `#3`...)
so that every item of the mix's cycle has an id of its own, as the run plan needs.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

from loadgen.workload.base import Cycled, WorkItem, Workload

#: A mix's cycle stops here whatever its parts' cycles (no run sends that many distinct
#: bodies; past it the cycle repeats).
MAX_CYCLE = 200_000


def first_cycle(items: Iterator[WorkItem], limit: int = MAX_CYCLE) -> list[WorkItem]:
    """A workload's items up to the first repeated id."""
    out: list[WorkItem] = []
    seen: set[str] = set()
    for item in itertools.islice(items, limit):
        if item.item_id in seen:
            break
        seen.add(item.item_id)
        out.append(item)
    return out


def units(cycle: list[WorkItem]) -> list[list[WorkItem]]:
    """The cycle cut into units: a session's turns together, other items alone."""
    out: list[list[WorkItem]] = []
    for item in cycle:
        turn = item.turn
        if turn is not None and turn.index > 0 and out and out[-1][-1].turn is not None \
                and out[-1][-1].turn.session == turn.session:
            out[-1].append(item)
        else:
            out.append([item])
    return out


def _renamed(item: WorkItem, part: int, round_: int) -> WorkItem:
    tag = f"mix{part}/{item.item_id}" + (f"#{round_}" if round_ > 1 else "")
    turn = item.turn
    if turn is not None:
        turn = dataclasses.replace(turn, session=f"mix{part}/{turn.session}"
                                   + (f"#{round_}" if round_ > 1 else ""))
    return dataclasses.replace(item, item_id=tag, turn=turn)


class Mix(Cycled):
    kind = "mix"

    def __init__(self, parts: list[Workload], weights: list[float] | None = None) -> None:
        self.parts = parts
        self.weights = weights or [1.0] * len(parts)

    def _build(self) -> list[WorkItem]:
        part_units = [units(first_cycle(p.items())) for p in self.parts]
        sizes = [sum(len(u) for u in us) for us in part_units]
        sent = [0] * len(self.parts)  # requests each part sent so far
        taken = [0] * len(self.parts)  # units each part sent so far
        out: list[WorkItem] = []
        total = sum(self.weights)
        while (any(s < size for s, size in zip(sent, sizes, strict=True))
               and len(out) < MAX_CYCLE):
            # The part furthest below its share of what was sent (ties: the first).
            p = min(range(len(self.parts)),
                    key=lambda i: (sent[i] / self.weights[i] * total, i))
            us = part_units[p]
            unit = us[taken[p] % len(us)]
            round_ = taken[p] // len(us) + 1
            out += [_renamed(item, p, round_) for item in unit]
            taken[p] += 1
            sent[p] += len(unit)
        return out
