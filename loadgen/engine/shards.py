"""`--workers N`: one phase's requests sharded over N processes, one event loop each.

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
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import orjson

from loadgen.records import RECORDS_FILE

if TYPE_CHECKING:
    from loadgen.engine.runner import Runner

POLL_S = 0.5


@dataclass(frozen=True)
class ShardSpec:
    scenario: dict[str, Any]
    out_dir: str
    run_id: str
    base_urls: list[str]
    model: str
    chars_per_token: float | None
    transport: str
    api_key: str | None
    index: int
    count: int
    concurrency: int
    rate_limit: float
    phase: str
    start_seq: int
    seq_count: int


def _shard_main(spec: ShardSpec, shared: Any, start: Any, conn: Connection) -> None:
    """Entry point of a worker process."""
    from pathlib import Path

    from loadgen.commands.run import event_loop_policy
    from loadgen.engine.runner import Runner
    from loadgen.scenario import Scenario

    data = spec.scenario
    data["load"] = {**data["load"], "concurrency": spec.concurrency,
                    "rate_limit": spec.rate_limit}
    scenario = Scenario.model_validate(data)
    runner = Runner(scenario, Path(spec.out_dir), spec.run_id, quiet=True,
                    transport=spec.transport, api_key=spec.api_key,
                    shard=(spec.index, spec.count))
    runner.state.base_urls = spec.base_urls
    runner.state.model = spec.model
    runner.state.chars_per_token = spec.chars_per_token
    runner.shared_in_flight = shared
    runner.start_barrier = start
    event_loop_policy()
    report = asyncio.run(runner.run_shard(spec.phase, spec.start_seq, spec.seq_count))
    conn.send({**report, "worker": spec.index})
    conn.close()


def _split(total: int, parts: int, index: int) -> int:
    return total // parts + (1 if index < total % parts else 0)


async def _follow(runner: Runner, path: Any, offset: int, shared: Any) -> None:
    """Progress from the shared records file (the workers' records, as they land)."""
    buf = b""
    while True:
        await asyncio.sleep(POLL_S)
        runner.progress.in_flight = shared.value
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            continue
        offset += len(data)
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            with contextlib.suppress(orjson.JSONDecodeError, TypeError, IndexError):
                rec = orjson.loads(line)
                runner.progress.update(rec["verdicts"][0],
                                       (rec.get("usage") or {}).get("completion_tokens") or 0)


async def run_sharded_phase(runner: Runner, phase: str, start: int, count: int
                            ) -> list[dict[str, Any]]:
    ctx = multiprocessing.get_context("spawn")
    n = min(runner.workers, count)
    sc = runner.sc
    concurrency = sc.load.concurrency
    shared = ctx.Value("i", 0)
    # Every worker sets up (imports, client) first; they start sending together, so
    # the phase's wall time is not stretched by staggered process start-up.
    start_barrier = ctx.Barrier(n)
    scenario = sc.model_dump(mode="json")
    procs = []
    for i in range(n):
        parent_conn, child_conn = ctx.Pipe(duplex=False)
        spec = ShardSpec(
            scenario=scenario, out_dir=str(runner.out_dir), run_id=runner.state.run_id,
            base_urls=runner.state.base_urls, model=runner.state.model,
            chars_per_token=runner.state.chars_per_token, transport=runner.transport,
            api_key=runner.api_key, index=i, count=n,
            concurrency=max(1, _split(concurrency, n, i)),
            rate_limit=sc.load.rate_limit / n, phase=phase, start_seq=start, seq_count=count)
        proc = ctx.Process(target=_shard_main, args=(spec, shared, start_barrier, child_conn),
                           name=f"dsv4-qual-worker-{i}", daemon=False)
        proc.start()
        child_conn.close()
        procs.append((proc, parent_conn))
    records = runner.out_dir / RECORDS_FILE
    offset = records.stat().st_size if records.exists() else 0
    follower = asyncio.ensure_future(_follow(runner, records, offset, shared))
    loop = asyncio.get_running_loop()
    try:
        await asyncio.gather(*(loop.run_in_executor(None, p.join) for p, _ in procs))
    except asyncio.CancelledError:
        # Interrupted: each worker records its in-flight requests as interrupted.
        for proc, _ in procs:
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGINT)
        await asyncio.gather(*(loop.run_in_executor(None, p.join, 60) for p, _ in procs))
        for proc, _ in procs:
            if proc.is_alive():
                proc.kill()
        raise
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    reports = []
    for proc, conn in procs:
        if conn.poll():
            reports.append(conn.recv())
        elif proc.exitcode != 0:
            reports.append({"worker": proc.name, "invalid":
                            f"worker process {proc.name} failed (exit {proc.exitcode})"})
    return reports
