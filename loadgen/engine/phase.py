"""One phase in one process: a fixed pool of coroutines pulling the next sequence number.

No task per request: `concurrency` workers each take the next seq, wait for pacing,
send, classify and append the record the moment it completes. Base URLs are used
round-robin by seq (vLLM data-parallel replicas). With `--workers`, every process
walks the same seqs and items but sends only its shard's (seq % count == index), so
a seq gets the same body as in one process.
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


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    def owns(self, seq: int) -> bool:
        return seq % self.count == self.index


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
    assert session.writer is not None and session.pacer is not None
    assert session.outage is not None
    stream = session.scenario.request.stream
    urls = session.facts.base_urls
    stopper, progress, writer = session.stopper, session.progress, session.writer
    while not stopper.stopped:
        seq = source.next_seq
        if seq >= end:
            return
        source.next_seq = seq + 1
        item = next(source.items)
        if not shard.owns(seq):
            continue
        endpoint = urls[seq % len(urls)]
        await session.pacer.wait(endpoint)
        if stopper.stopped:
            return
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
