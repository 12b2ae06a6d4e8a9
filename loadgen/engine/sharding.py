"""`--workers N`, the parent's side: one phase's requests sharded over N processes.

Sequence numbers stay global (worker i sends seq i, i+N, ...; every worker walks the
same deterministic item stream, so a seq gets the same body as in one process), the
concurrency is split so the total in flight is the scenario's, and every worker
appends its records to the same records.jsonl (O_APPEND: a record is one write).
A shared counter gives each record the global number in flight. The parent keeps
telemetry and progress, forwards SIGINT/SIGTERM, and waits at each phase boundary
so no worker starts measuring while another still primes.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from loadgen.engine.budget import InfraBudget
from loadgen.engine.progress import Progress
from loadgen.engine.session import Session
from loadgen.engine.shard_worker import STOP_INVALID, ShardReport, ShardSpec, shard_main
from loadgen.engine.stopping import Stopper
from loadgen.records import Landed
from loadgen.results import RECORDS_FILE

POLL_S = 0.5


def _split(total: int, parts: int, index: int) -> int:
    return total // parts + (1 if index < total % parts else 0)


@dataclass
class _Follower:
    """Progress from the shared records file (the workers' records, as they land), and
    the phase's infrastructure errors over all workers against the gate's limit (each
    worker stops at its own share's count; the sum stops them all)."""

    progress: Progress
    path: Path
    offset: int  # where the next read starts
    shared: Any  # the workers' shared in-flight counter
    budget: InfraBudget
    stopper: Stopper
    _buf: bytes = b""  # a record's first part, until its line ends

    def read(self) -> None:
        """Count the records appended since the last read."""
        self.progress.in_flight = self.shared.value
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        self.offset += len(data)
        *lines, self._buf = (self._buf + data).split(b"\n")
        for line in lines:
            try:
                rec = Landed.model_validate_json(line)
            except ValidationError:
                continue  # torn, or not a record
            self.progress.update(rec.verdicts, rec.completion_tokens)
            spent = self.budget.spent(rec.verdicts, rec.error, rec.seq, rec.endpoint)
            # A server that may have gone away: the workers' outage watches speak
            # first (each worker's own budget waits for its watch's check).
            if spent is not None and (rec.error_kind is None or not rec.error_kind.server_gone):
                self.stopper.stop("invalid", spent)

    async def follow(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            self.read()


async def run_sharded_phase(session: Session, out_dir: Path, workers: int, *, transport: str,
                            api_key: str | None, phase: str, start: int, count: int
                            ) -> list[ShardReport]:
    """Spawn the workers for seqs [start, start + count), follow them, return their reports."""
    ctx = multiprocessing.get_context("spawn")
    n = min(workers, count)
    scenario = session.scenario
    facts = session.facts
    concurrency = scenario.load.concurrency
    shared = ctx.Value("i", 0)
    # Every worker sets up (imports, client) first; they start sending together, so
    # the phase's wall time is not stretched by staggered process start-up.
    start_barrier = ctx.Barrier(n)
    scenario_doc = scenario.model_dump(mode="json")
    procs = []
    for i in range(n):
        parent_conn, child_conn = ctx.Pipe(duplex=False)
        spec = ShardSpec(
            scenario=scenario_doc, out_dir=str(out_dir), run_id=facts.run_id,
            base_urls=facts.base_urls, model=facts.model,
            chars_per_token=facts.chars_per_token, transport=transport,
            api_key=api_key, index=i, count=n,
            concurrency=max(1, _split(concurrency, n, i)),
            rate_limit=scenario.load.rate_limit / n, phase=phase, start_seq=start, seq_count=count,
            served_tokens=scenario.verdicts.served_tokens)
        proc = ctx.Process(target=shard_main, args=(spec, shared, start_barrier, child_conn),
                           name=f"dsv4-qual-worker-{i}", daemon=False)
        proc.start()
        child_conn.close()
        procs.append((proc, parent_conn))
    records = out_dir / RECORDS_FILE
    offset = records.stat().st_size if records.exists() else 0
    session.progress.start_phase(phase, count)
    follower = _Follower(session.progress, records, offset, shared,
                         InfraBudget.for_phase(scenario, phase), session.stopper)
    following = asyncio.ensure_future(follower.follow())
    loop = asyncio.get_running_loop()
    try:
        await asyncio.gather(*(loop.run_in_executor(None, p.join) for p, _ in procs))
    except asyncio.CancelledError:
        # Interrupted, or the errors of all workers together passed the gate's limit:
        # each worker records its in-flight requests as interrupted, saying which.
        reason = session.stopper.reason
        sig = STOP_INVALID if reason is not None and reason.kind == "invalid" else signal.SIGINT
        for proc, _ in procs:
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, sig)
        await asyncio.gather(*(loop.run_in_executor(None, p.join, 60) for p, _ in procs))
        for proc, _ in procs:
            if proc.is_alive():
                proc.kill()
        raise
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        follower.read()  # the records that landed after the last poll
        session.progress.end_phase(session.stopper.reason)
    reports: list[ShardReport] = []
    for proc, conn in procs:
        if conn.poll():
            reports.append(conn.recv())
        elif proc.exitcode != 0:
            reports.append(ShardReport(proc.name, invalid=f"worker process {proc.name} "
                                                          f"failed (exit {proc.exitcode})"))
    return reports
