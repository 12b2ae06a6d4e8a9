"""What one run will send, worked out once before anything is sent.

The pre-flight context check, the priming and measurement phases and the reference
phase all ask the same question of the same deterministic workload (which item does
seq N send?), so one plan answers all of them from one `make_workload` and one
`RequestMaker` (a body is made once, whoever asks first: the check or a phase).

The plan keeps one cycle of the workload, not the planned range. Every workload
repeats its first cycle forever with item ids distinct inside it (tool-turn and replay
cycle a list they built; long-context regenerates the same 64 documents each time), so
seq N sends item N mod the cycle's length. One cycle is what the check and the
reference sample need anyway, and it is small next to the range: a cache of a soak's
first 100k items would hold each long-context document over 1500 times (the workload
makes new objects each cycle), and a worker process starting at seq 50k would still
generate 50k documents to skip them. A range shorter than one cycle keeps only the
items it sends.

A worker process (`--workers`) builds its own plan from the same scenario and chars
per token: the same items for the same seqs, without pickling documents through a pipe.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

import orjson

from loadgen.engine.phase import SeqSource
from loadgen.engine.requests import RequestMaker
from loadgen.scenario import Scenario
from loadgen.workload import WorkItem, make_workload

PRIMING = "priming"
MEASUREMENT = "measurement"
PHASES = (PRIMING, MEASUREMENT)
REFERENCE = "reference"


@dataclass(frozen=True)
class RunPlan:
    """The run's items by seq, the distinct ones, the reference sample, and the bodies."""

    scenario: Scenario
    maker: RequestMaker
    #: The workload's first cycle (cut at the planned range): ids distinct, in seq order.
    cycle: tuple[WorkItem, ...]

    @classmethod
    def build(cls, scenario: Scenario, chars_per_token: float | None,
              maker: RequestMaker) -> RunPlan:
        """The plan of a run of `scenario` whose long-context lengths use `chars_per_token`
        (None: the estimate) and whose bodies `maker` makes."""
        planned = scenario.load.priming + scenario.load.measurement
        return cls(scenario, maker, one_cycle(make_workload(scenario, chars_per_token).items(),
                                              planned))

    @property
    def planned(self) -> int:
        """The seqs priming and measurement send; the reference phase's follow them."""
        return self.scenario.load.priming + self.scenario.load.measurement

    def distinct(self) -> tuple[WorkItem, ...]:
        """Each distinct item priming and measurement send (the reference phase resends
        measured ones), in the order they are first sent."""
        return self.cycle

    @cached_property
    def reference(self) -> tuple[WorkItem, ...]:
        """What the reference phase sends, once each, in order (worked out when first
        asked: a worker process never sends it)."""
        # Each sampled body goes alone: a conversation's turn is sent without its
        # conversation's think time.
        return tuple(dataclasses.replace(item, turn=None) for item in
                     reference_sample(self.measured(), self.scenario.reference.requests))

    @property
    def phases(self) -> list[str]:
        """The phases in order: the reference phase (one request at a time) before
        priming or after measurement, when the scenario asks for one."""
        reference = self.scenario.reference
        if reference.requests <= 0:
            return list(PHASES)
        return [REFERENCE, *PHASES] if reference.when == "before" else [*PHASES, REFERENCE]

    def first_seq(self, phase: str) -> int:
        """The phase's first seq: a seq names the same request in every phase order."""
        return {PRIMING: 0, MEASUREMENT: self.scenario.load.priming,
                REFERENCE: self.planned}[phase]

    def count(self, phase: str) -> int:
        load = self.scenario.load
        return {PRIMING: load.priming, MEASUREMENT: load.measurement,
                REFERENCE: len(self.reference)}[phase]

    def item(self, seq: int) -> WorkItem:
        """What priming or measurement sends at `seq`."""
        if not 0 <= seq < self.planned:
            raise IndexError(f"seq {seq} is outside the planned range 0..{self.planned - 1}")
        return self.cycle[seq % len(self.cycle)]

    def items(self, start: int = 0) -> Iterator[WorkItem]:
        """The items of seqs `start` up to the end of measurement, in order."""
        return (self.item(seq) for seq in range(start, self.planned))

    def measured(self) -> Iterator[WorkItem]:
        """Each distinct item of the measured range, in the order it is first sent
        (past one cycle every item repeats)."""
        load = self.scenario.load
        return itertools.islice(self.items(load.priming), min(load.measurement, len(self.cycle)))

    def source(self, phase: str) -> SeqSource:
        """The phase's seqs and items, from its first seq."""
        start = self.first_seq(phase)
        items = iter(self.reference) if phase == REFERENCE else self.items(start)
        return SeqSource(items, next_seq=start)


def one_cycle(items: Iterator[WorkItem], planned: int) -> tuple[WorkItem, ...]:
    """The items up to the first repeated id, or the first `planned` if no id repeats by
    then; a workload whose first repeat is not its first item breaks the plan's indexing
    and is refused."""
    cycle: list[WorkItem] = []
    seen: set[str] = set()
    for item in itertools.islice(items, planned):
        if item.item_id in seen:
            if item.item_id != cycle[0].item_id:
                raise ValueError(f"workload repeats {item.item_id} before its first item "
                                 f"{cycle[0].item_id}: it does not cycle")
            break
        seen.add(item.item_id)
        cycle.append(item)
    return tuple(cycle)


def reference_sample(measured: Iterable[WorkItem], wanted: int) -> list[WorkItem]:
    """Up to `wanted` measured items with distinct bodies, evenly spread over the range.

    The measured seqs' items are known before anything is sent, so the sample is the
    same whether the reference phase runs before priming or after measurement."""
    if wanted <= 0:
        return []
    by_id: dict[str, WorkItem] = {}
    for item in measured:
        by_id.setdefault(item.item_id, item)
    # Two items may send the same body (a replay file with repeated lines): one each.
    distinct: dict[bytes, WorkItem] = {}
    for item in by_id.values():
        key = hashlib.blake2b(orjson.dumps([item.messages, item.tools, item.body]),
                              digest_size=16).digest()
        distinct.setdefault(key, item)
    pool = list(distinct.values())
    if len(pool) <= wanted:
        return pool
    return [pool[(i * len(pool)) // wanted] for i in range(wanted)]
