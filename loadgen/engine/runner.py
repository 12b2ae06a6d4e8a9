"""The parent of a run: wait until ready -> priming -> measurement, then the server's facts.

It resolves the model, calibrates long-context lengths on the server's tokenizer,
starts telemetry, and runs each phase itself or hands it to worker processes
(`--workers`, engine.sharding). Each record is classified and appended to
records.jsonl the moment it completes; memory holds counters, never the records.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from loadgen.engine.observer import RunObserver
from loadgen.engine.phase import run_phase
from loadgen.engine.plan import REFERENCE, RunPlan
from loadgen.engine.preflight import calibrate_chars_per_token, check_context_fits
from loadgen.engine.progress import Progress
from loadgen.engine.requests import RequestMaker
from loadgen.engine.session import Session
from loadgen.engine.shard_worker import ShardReport
from loadgen.exit_codes import RunInvalidError
from loadgen.run_facts import ClientReport, ReadyProbe, RunFacts
from loadgen.scenario import Scenario
from loadgen.targets.readiness import ServerReady, choose_model, wait_ready
from loadgen.targets.telemetry import Telemetry
from loadgen.targets.tokenizer_info import served_special_tokens
from loadgen.workload import sized_in_tokens


class Runner:
    def __init__(self, scenario: Scenario, out_dir: Path, run_id: str, *, quiet: bool = False,
                 transport: str = "auto", api_key: str | None = None, workers: int = 1,
                 observer: RunObserver | None = None, side: str | None = None) -> None:
        self.scenario = scenario
        self.side = side
        self.out_dir = out_dir
        self.facts = RunFacts(run_id=run_id, scenario=scenario.name,
                              base_urls=list(scenario.target.base_urls),
                              load=scenario.load_claim())
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
                plan = await session.stopper.guarded(self._prepare(session))
                if plan is None or session.stopper.stopped:
                    return self._finish()
                await self.telemetry.begin()
                session.selfmon.start()
                for phase in plan.phases:
                    async with self.telemetry.phase(phase):
                        if phase == REFERENCE:
                            await self._reference(session, plan)
                        else:
                            await self._phase(session, plan, phase)
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

    async def _prepare(self, session: Session) -> RunPlan:
        """Every server ready, the model chosen, long-context lengths calibrated, the
        run planned on them, and its longest request checked against each server's
        max_model_len (a run that cannot fit is invalid before anything is sent)."""
        ready = await self._wait_all_ready(session)
        self.facts.model = choose_model(self.scenario.target.model, ready[0])
        await self._server_special_tokens(session)
        if sized_in_tokens(self.scenario.workload):
            self.facts.chars_per_token = await calibrate_chars_per_token(
                session.http, self.facts.base_urls[0], self.facts.model)
        plan = RunPlan.build(self.scenario, self.facts.chars_per_token,
                             RequestMaker(self.scenario, self.facts.run_id, self.facts.model))
        await check_context_fits(session.http, ready, self.facts.model, plan,
                                 note=session.progress.note)
        return plan

    async def _server_special_tokens(self, session: Session) -> None:
        """Each server's own special tokens, where it declares them, join the judge's
        before anything is sent (a model's private markers no catalogue holds)."""
        declared: set[str] | None = None
        for url in self.facts.base_urls:
            tokens = await served_special_tokens(session.http, url)
            if tokens is not None:
                declared = (declared or set()) | set(tokens)
        if declared is not None:
            self.facts.server_special_tokens = sorted(declared)
            self.scenario.verdicts.add_served_tokens(sorted(declared))

    async def _wait_all_ready(self, session: Session) -> list[ServerReady]:
        ready = []
        for url in self.facts.base_urls:
            info = await wait_ready(session.http, url, self.scenario.target.ready_timeout_s,
                                    say=session.progress.note)
            self.facts.ready.append(ReadyProbe(base_url=url, waited_s=round(info.waited_s, 3),
                                               readiness=info.readiness))
            ready.append(info)
        return ready

    async def _reference(self, session: Session, plan: RunPlan) -> None:
        """Each sampled body once, nothing else in flight (its seqs follow the measured
        ones whenever it runs, so a seq names the same request in every phase order)."""
        self.facts.reference_items = [item.item_id for item in plan.reference]
        await run_phase(session, plan.source(REFERENCE), plan.maker, REFERENCE,
                        plan.count(REFERENCE), concurrency=1)

    async def _phase(self, session: Session, plan: RunPlan, phase: str) -> None:
        count = plan.count(phase)
        if self.workers > 1 and count > 0:
            from loadgen.engine.sharding import run_sharded_phase

            reports = await session.stopper.guarded(run_sharded_phase(
                session, self.out_dir, self.workers, transport=self.transport,
                api_key=self.api_key, phase=phase, start=plan.first_seq(phase),
                count=count)) or []
            self._worker_reports += reports
            reason = session.stopper.reason  # the workers' errors together over the limit
            if reason is not None and reason.kind == "invalid":
                raise RunInvalidError(reason.message)
            invalid = next((r.invalid for r in reports if r.invalid), None)
            if invalid:
                raise RunInvalidError(invalid)
            return
        await run_phase(session, plan.source(phase), plan.maker, phase, count)

    def server_document(self) -> dict[str, Any]:
        return self.telemetry.document() if self.telemetry else {}


def combine_reports(parent: ClientReport, workers: list[ShardReport]) -> ClientReport:
    """The client's self-monitoring over all worker processes."""
    cpu = sum(w.client.cpu_s or 0.0 for w in workers)
    records = sum(w.records for w in workers)
    lags = [lag for w in workers if (lag := w.client.loop_lag_ms_p99) is not None]
    return dataclasses.replace(
        parent,
        workers=len({w.worker for w in workers}) or len(workers),
        cpu_s=round(cpu, 3),
        cpu_ms_per_request=round(cpu * 1000 / records, 3) if records else None,
        loop_lag_ms_p99=max(lags) if lags else None,
        saturated=any(w.client.saturated for w in workers),
        # One worker's own work is the client's; otherwise a busy host, if any said so.
        saturation=next((c for c in ("client", "host")
                         if any(w.client.saturation == c for w in workers)), None),
        cpu_wait_share=max((s for w in workers if (s := w.client.cpu_wait_share) is not None),
                           default=None),
        per_worker=[w.to_dict() for w in workers],
    )
