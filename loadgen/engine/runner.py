"""The parent of a run: wait until ready -> priming -> measurement, then the server's facts.

It resolves the model, calibrates long-context lengths on the server's tokenizer,
starts telemetry, and runs each phase itself or hands it to worker processes
(`--workers`, engine.sharding). Each record is classified and appended to
records.jsonl the moment it completes; memory holds counters, never the records.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from loadgen.engine.observer import RunObserver
from loadgen.engine.phase import SeqSource, run_phase
from loadgen.engine.preflight import calibrate_chars_per_token, check_context_fits
from loadgen.engine.progress import Progress
from loadgen.engine.reference import reference_items
from loadgen.engine.requests import RequestMaker
from loadgen.engine.session import Session
from loadgen.engine.shard_worker import ShardReport
from loadgen.exit_codes import RunInvalidError
from loadgen.run_facts import RunFacts
from loadgen.scenario import Scenario
from loadgen.targets.readiness import ServerReady, choose_model, wait_ready
from loadgen.targets.telemetry import Telemetry
from loadgen.workload import make_workload

PHASES = ("priming", "measurement")
REFERENCE = "reference"


class Runner:
    def __init__(self, scenario: Scenario, out_dir: Path, run_id: str, *, quiet: bool = False,
                 transport: str = "auto", api_key: str | None = None, workers: int = 1,
                 observer: RunObserver | None = None, side: str | None = None) -> None:
        self.scenario = scenario
        self.side = side
        self.out_dir = out_dir
        self.facts = RunFacts(run_id=run_id, scenario=scenario.name,
                              base_urls=list(scenario.target.base_urls),
                              load=scenario.load_claim().to_dict())
        self.transport = transport
        self.api_key = api_key
        self.workers = workers
        self.quiet = quiet
        self.observer = observer
        self.telemetry: Telemetry | None = None
        self._worker_reports: list[ShardReport] = []

    async def run(self) -> RunFacts:
        scenario = self.scenario
        progress = Progress(quiet=self.quiet, observer=self.observer, side=self.side)
        async with Session(scenario, self.out_dir, self.facts, transport=self.transport,
                           api_key=self.api_key, progress=progress) as session:
            self.telemetry = Telemetry(session.http, self.facts.base_urls,
                                       scenario.target.receipts_dir,
                                       scenario.telemetry.scrape_interval_s)
            try:
                await session.stopper.guarded(self._prepare(session))
                if session.stopper.stopped:
                    return self._finish()
                source = SeqSource(make_workload(scenario, self.facts.chars_per_token).items())
                maker = RequestMaker(scenario, self.facts.run_id, self.facts.model)
                await self.telemetry.begin()
                session.selfmon.start()
                for phase in self._plan():
                    async with self.telemetry.phase(phase):
                        if phase == REFERENCE:
                            await self._reference(session, maker)
                        else:
                            load = scenario.load
                            count = load.priming if phase == "priming" else load.measurement
                            await self._phase(session, source, maker, phase, count)
                    if session.stopper.stopped:
                        break
                    self.facts.phases_done.append(phase)
            except RunInvalidError as exc:
                self.facts.invalid = str(exc)
            finally:
                reason = session.stopper.reason
                if reason is not None and reason.kind == "interrupted":
                    self.facts.interrupted = reason.message
                await session.selfmon.stop()
                await self.telemetry.end()
                self.facts.client = session.selfmon.report(session.records_written)
                if self._worker_reports:
                    self.facts.client = combine_reports(self.facts.client, self._worker_reports)
        return self._finish()

    def _finish(self) -> RunFacts:
        self.facts.finished = time.time()
        return self.facts

    async def _prepare(self, session: Session) -> None:
        """Every server ready, the model chosen, long-context lengths calibrated, and
        the longest request checked against each server's max_model_len (a run that
        cannot fit is invalid before anything is sent)."""
        ready = await self._wait_all_ready(session)
        self.facts.model = choose_model(self.scenario.target.model, ready[0])
        if self.scenario.workload.kind == "long-context":
            self.facts.chars_per_token = await calibrate_chars_per_token(
                session.http, self.facts.base_urls[0], self.facts.model)
        await check_context_fits(session.http, ready, self.facts.model, self.scenario,
                                 self.facts.chars_per_token, note=session.progress.note)

    async def _wait_all_ready(self, session: Session) -> list[ServerReady]:
        ready = []
        for url in self.facts.base_urls:
            info = await wait_ready(session.http, url, self.scenario.target.ready_timeout_s,
                                    say=session.progress.note)
            self.facts.ready.append({"base_url": url, "waited_s": round(info.waited_s, 3),
                                     "readiness": info.readiness})
            ready.append(info)
        return ready

    def _plan(self) -> list[str]:
        """The phases in order: the reference phase (one request at a time) before
        priming or after measurement, when the scenario asks for one."""
        reference = self.scenario.reference
        if reference.requests <= 0:
            return list(PHASES)
        return [REFERENCE, *PHASES] if reference.when == "before" else [*PHASES, REFERENCE]

    async def _reference(self, session: Session, maker: RequestMaker) -> None:
        """Each sampled body once, nothing else in flight (its seqs follow the measured
        ones whenever it runs, so a seq names the same request in every phase plan)."""
        items = reference_items(self.scenario, self.facts.chars_per_token)
        load = self.scenario.load
        self.facts.reference_items = [item.item_id for item in items]
        source = SeqSource(iter(items), next_seq=load.priming + load.measurement)
        await run_phase(session, source, maker, REFERENCE, len(items), concurrency=1)

    async def _phase(self, session: Session, source: SeqSource, maker: RequestMaker,
                     phase: str, count: int) -> None:
        if self.workers > 1 and count > 0:
            from loadgen.engine.sharding import run_sharded_phase

            reports = await session.stopper.guarded(run_sharded_phase(
                session, self.out_dir, self.workers, transport=self.transport,
                api_key=self.api_key, phase=phase, start=source.next_seq, count=count)) or []
            self._worker_reports += reports
            source.skip(count)
            reason = session.stopper.reason  # the workers' errors together over the limit
            if reason is not None and reason.kind == "invalid":
                raise RunInvalidError(reason.message)
            invalid = next((r.invalid for r in reports if r.invalid), None)
            if invalid:
                raise RunInvalidError(invalid)
            return
        await run_phase(session, source, maker, phase, count)

    def server_document(self) -> dict[str, Any]:
        return self.telemetry.document() if self.telemetry else {}


def combine_reports(parent: dict[str, Any], workers: list[ShardReport]) -> dict[str, Any]:
    """The client's self-monitoring over all worker processes."""
    cpu = sum(w.client.get("cpu_s") or 0.0 for w in workers)
    records = sum(w.records for w in workers)
    lags = [lag for w in workers if (lag := w.client.get("loop_lag_ms_p99")) is not None]
    return {
        **parent,
        "workers": len({w.worker for w in workers}) or len(workers),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_request": round(cpu * 1000 / records, 3) if records else None,
        "loop_lag_ms_p99": max(lags) if lags else None,
        "saturated": any(w.client.get("saturated") for w in workers),
        "per_worker": [w.to_dict() for w in workers],
    }
