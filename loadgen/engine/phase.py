"""One phase in one process: a fixed pool of coroutines pulling the next unit of seqs.

No task per request: `concurrency` workers each take the next *unit*, wait for pacing,
send, classify and append the record the moment it completes. A unit is one seq, or the
turns of one conversation that fall in the phase (consecutive seqs): one worker sends
them in order, each after the previous reply and the turn's think time, so a
conversation holds its slot while it thinks, as a user would. Base URLs are used
round-robin by seq (vLLM data-parallel replicas). With `--workers`, every process walks
the same units and items but sends only its shard's (unit number % count == index), so
a seq gets the same body as in one process and a conversation is never split.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

from loadgen.engine.budget import InfraBudget
from loadgen.engine.requests import RequestMaker
from loadgen.engine.session import Session
from loadgen.exit_codes import RunInvalidError
from loadgen.judge.verdicts import classify
from loadgen.records import ErrorKind
from loadgen.workload import WorkItem


@dataclass
class SeqSource:
    """The run's next sequence number and the deterministic item stream it indexes."""

    items: Iterator[WorkItem]
    next_seq: int = 0
    #: Units handed out so far (what a shard's share is counted in).
    units: int = 0
    _ahead: WorkItem | None = None

    def _peek(self) -> WorkItem:
        if self._ahead is None:
            self._ahead = next(self.items)
        return self._ahead

    def _take(self) -> WorkItem:
        item = self._peek()
        self._ahead = None
        self.next_seq += 1
        return item

    def claim(self, end: int) -> tuple[int, int, list[WorkItem]] | None:
        """The next unit below seq `end`: (its number, its first seq, its items); None
        when the phase has handed out every seq."""
        if self.next_seq >= end:
            return None
        first = self.next_seq
        items = [self._take()]
        while self.next_seq < end:
            last, ahead = items[-1].turn, self._peek().turn
            if last is None or ahead is None or ahead.session != last.session \
                    or ahead.index != last.index + 1:
                break
            items.append(self._take())
        number = self.units
        self.units += 1
        return number, first, items


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    def owns(self, unit: int) -> bool:
        return unit % self.count == self.index


async def run_phase(session: Session, source: SeqSource, maker: RequestMaker, phase: str,
                    count: int, shard: Shard = Shard(), concurrency: int | None = None) -> None:
    """Send `count` seqs from `source` (this shard's share) with `concurrency` in flight
    (the scenario's by default); RunInvalidError if the run became invalid meanwhile (the
    server went away, or the phase's infrastructure errors passed the gate's limit:
    `engine.budget`). An interrupt ends the phase quietly (the stop reason says it)."""
    if count <= 0:
        return
    end = source.next_seq + count
    slots = min(concurrency or session.scenario.load.concurrency, count)
    budget = InfraBudget.for_phase(session.scenario, phase)
    session.progress.start_phase(phase, count)
    try:
        await session.stopper.guarded(_slots(slots, session, source, maker, phase, end, shard,
                                             budget))
    finally:
        session.progress.end_phase(session.stopper.reason)
    reason = session.stopper.reason
    if reason is not None and reason.kind == "invalid":
        raise RunInvalidError(reason.message)


async def _slots(slots: int, session: Session, source: SeqSource, maker: RequestMaker,
                 phase: str, end: int, shard: Shard, budget: InfraBudget) -> None:
    """`slots` worker coroutines, together: the phase's concurrency."""
    await asyncio.gather(*(_worker(session, source, maker, phase, end, shard, budget)
                           for _ in range(slots)))


async def _worker(session: Session, source: SeqSource, maker: RequestMaker, phase: str,
                  end: int, shard: Shard, budget: InfraBudget) -> None:
    stopper = session.stopper
    while not stopper.stopped:
        unit = source.claim(end)
        if unit is None:
            return
        number, first, items = unit
        if not shard.owns(number):
            continue
        for offset, item in enumerate(items):
            if offset and item.turn is not None and item.turn.think_s > 0:
                await asyncio.sleep(item.turn.think_s)  # the user reads, then types
            if stopper.stopped or not await _send(session, maker, phase, first + offset,
                                                  item, budget):
                return


async def _send(session: Session, maker: RequestMaker, phase: str, seq: int, item: WorkItem,
                budget: InfraBudget) -> bool:
    """Send one request and record its reply; False when the run stopped meanwhile."""
    assert session.writer is not None and session.pacer is not None
    assert session.outage is not None
    stream = session.scenario.request.stream
    urls = session.facts.base_urls
    stopper, progress, writer = session.stopper, session.progress, session.writer
    endpoint = urls[seq % len(urls)]
    await session.pacer.wait(endpoint)
    if stopper.stopped:
        return False
    prepared = maker.body(item)
    record = maker.record(phase, seq, item, endpoint, prepared)
    record.in_flight = session.in_flight.enter()
    progress.in_flight = session.in_flight.local
    try:
        retry_after = await session.client.send(record, prepared.raw, stream)
    except asyncio.CancelledError:
        why = stopper.reason.message if stopper.reason else "cancelled"
        record.fail(ErrorKind.INTERRUPTED, f"interrupted: {why}", first_only=False)
        record.verdicts = ["interrupted"]
        writer.write(record)
        progress.update(record.verdicts, 0)
        raise
    finally:
        session.in_flight.leave()
        progress.in_flight = session.in_flight.local
    record.verdicts = classify(record, session.scenario.verdicts)
    writer.write(record)
    progress.update(record.verdicts, record.usage.completion_tokens or 0)
    if retry_after:
        session.pacer.back_off(endpoint, retry_after)
    session.outage.saw(record)
    spent = budget.spent(record.verdicts, record.error, seq, endpoint)
    # The gate can no longer pass: stop sending; but where the server may have gone
    # away, its restart handling (engine.outage) speaks first.
    if spent is not None and not session.outage.then_stop(endpoint, spent):
        stopper.stop("invalid", spent)
    return not stopper.stopped
