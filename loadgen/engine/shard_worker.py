"""One worker process of a sharded phase (`--workers`): its seqs, its records.

The parent waited for readiness and resolved the model; a worker sets up its own
session (event loop, HTTP client, records file opened for appending), waits at the
start barrier so all workers begin together, sends its shard of the phase and hands
back its self-monitoring report.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from loadgen.engine import loop
from loadgen.engine.in_flight import InFlight
from loadgen.engine.phase import SeqSource, Shard, run_phase
from loadgen.engine.plan import RunPlan
from loadgen.engine.progress import Progress
from loadgen.engine.requests import RequestMaker
from loadgen.engine.session import Session
from loadgen.exit_codes import RunInvalidError
from loadgen.run_facts import ClientReport, RunFacts
from loadgen.scenario import Scenario

BARRIER_TIMEOUT_S = 120
#: The parent's word that the run became invalid (the phase's infrastructure errors
#: over all workers passed the gate's limit): stop as SIGINT would, saying why.
STOP_INVALID = signal.SIGUSR1
STOPPED_BY_PARENT = ("stopped: the phase's infrastructure errors over all workers passed "
                     "gate.max_infra_errors")


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
    #: The judge's special tokens of the served model, the server's included (a private
    #: attribute of the scenario, which its document does not carry).
    served_tokens: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShardReport:
    """What one worker process tells the parent when its share of a phase is done (sent
    whole through the pipe, so both sides read the same fields)."""

    worker: int | str  # its index, or its process name when it died without a word
    records: int = 0
    interrupted: str | None = None  # why it stopped early, in the stop signal's words
    invalid: str | None = None  # why the run became invalid in this worker
    client: ClientReport = field(default_factory=ClientReport)  # SelfMonitor.report

    def to_dict(self) -> dict[str, Any]:
        """summary.json's `client.per_worker` entry."""
        own = {k: v for k, v in asdict(self.client).items() if k not in ("workers", "per_worker")}
        return {**own, "records": self.records, "interrupted": self.interrupted,
                "invalid": self.invalid, "worker": self.worker}


async def send_shard(spec: ShardSpec, shared_in_flight: Any, barrier: Any) -> ShardReport:
    data = dict(spec.scenario)
    data["load"] = {**data["load"], "concurrency": spec.concurrency,
                    "rate_limit": spec.rate_limit}
    scenario = Scenario.model_validate(data)
    scenario.verdicts.add_served_tokens(spec.served_tokens)
    facts = RunFacts(run_id=spec.run_id, scenario=scenario.name, base_urls=spec.base_urls,
                     model=spec.model, chars_per_token=spec.chars_per_token)
    async with Session(scenario, Path(spec.out_dir), facts, transport=spec.transport,
                       api_key=spec.api_key, progress=Progress(quiet=True),
                       in_flight=InFlight(shared_in_flight)) as session:
        # The parent's plan, built again here: the same item for the same seq.
        plan = RunPlan.build(scenario, spec.chars_per_token,
                             RequestMaker(scenario, spec.run_id, spec.model, worker=spec.index))
        source = SeqSource(plan.items(spec.start_seq), next_seq=spec.start_seq)
        asyncio.get_running_loop().add_signal_handler(
            STOP_INVALID, session.stopper.stop, "invalid", STOPPED_BY_PARENT)
        if barrier is not None:
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait,
                                                             BARRIER_TIMEOUT_S)
        session.selfmon.start()
        try:
            await run_phase(session, source, plan.maker, spec.phase, spec.seq_count,
                            Shard(spec.index, spec.count))
        except RunInvalidError as exc:
            facts.invalid = str(exc)
        await session.selfmon.stop()
        reason = session.stopper.reason
        interrupted = reason.message if reason and reason.kind == "interrupted" else None
        return ShardReport(spec.index, session.records_written, interrupted, facts.invalid,
                           session.selfmon.report(session.records_written))


def shard_main(spec: ShardSpec, shared_in_flight: Any, barrier: Any, conn: Connection) -> None:
    """Entry point of a worker process."""
    conn.send(loop.run(send_shard(spec, shared_in_flight, barrier)))
    conn.close()
