"""A run's phases: wait until ready -> priming -> measurement.

Concurrency is a fixed pool of worker coroutines pulling the next sequence number
(no task per request), the rate limit is asyncio-throttle behind one lock (one
waiter polls it, not all of them), and base URLs are used round-robin (vLLM
data-parallel replicas). Each record is classified and appended to records.jsonl the
moment it completes; memory holds counters, never the records.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import orjson
from asyncio_throttle import Throttler

from loadgen.engine.client import ChatClient, Timeouts
from loadgen.engine.progress import Progress
from loadgen.engine.selfmon import SelfMonitor
from loadgen.engine.transport import make_http_client
from loadgen.exit_codes import RunInvalidError
from loadgen.judge.verdicts import classify
from loadgen.records import RECORDS_FILE, RecordWriter, RequestRecord
from loadgen.scenario import Scenario
from loadgen.target.readiness import ServerReady, choose_model, probe, wait_ready
from loadgen.target.telemetry import Telemetry
from loadgen.workload import WorkItem, make_workload
from loadgen.workload.tokens import calibrate_chars_per_token

PHASES = ("priming", "measurement")
# Transport failures that mean "the server went away" rather than "this reply broke".
_DOWN_PREFIXES = ("connection failed", "stream broken")


@dataclass
class RunState:
    """What the run learnt beyond its records; becomes summary.json's `run` section."""

    run_id: str
    scenario: str
    base_urls: list[str]
    model: str = ""
    started: float = field(default_factory=time.time)
    finished: float | None = None
    interrupted: str | None = None
    invalid: str | None = None
    ready: list[dict[str, Any]] = field(default_factory=list)
    chars_per_token: float | None = None
    server_restarts: int = 0
    phases_done: list[str] = field(default_factory=list)
    client: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _throttler(rate: float) -> Throttler | None:
    if rate <= 0:
        return None
    frac = Fraction(rate).limit_denominator(1000)
    # Spread the allowance: at most ~1/10 s worth of requests in one burst.
    burst = max(1, int(rate // 10))
    period = float(Fraction(burst) / frac)
    return Throttler(rate_limit=burst, period=period, retry_interval=min(0.01, period / 4))


class Runner:
    def __init__(
        self,
        scenario: Scenario,
        out_dir: Path,
        run_id: str,
        *,
        quiet: bool = False,
        transport: str = "auto",
        api_key: str | None = None,
        shard: tuple[int, int] = (0, 1),
        workers: int = 1,
    ) -> None:
        self.sc = scenario
        self.out_dir = out_dir
        self.state = RunState(run_id=run_id, scenario=scenario.name,
                              base_urls=list(scenario.target.base_urls))
        self.transport = transport
        self.api_key = api_key
        self.progress = Progress(quiet=quiet)
        self.shard = shard
        self.workers = workers
        self.in_flight = 0
        # With --workers, the in-flight count every process sees (shared memory).
        self.shared_in_flight: Any = None
        self.start_barrier: Any = None  # --workers: start sending together
        self.worker_reports: list[dict[str, Any]] = []
        self.writer: RecordWriter | None = None
        self._items: Iterator[WorkItem] | None = None
        self._bodies: dict[str, tuple[bytes, str]] = {}
        self._next_seq = 0
        self._end_seq = 0
        self._throttle_lock = asyncio.Lock()
        self._throttler = _throttler(scenario.load.rate_limit)
        self._paused_until: dict[str, float] = {}
        self._healthy: dict[str, asyncio.Event] = {}
        self._recovering: dict[str, asyncio.Task[None]] = {}
        self._stop_reason: str | None = None
        self._phase_task: asyncio.Task[Any] | None = None
        self.telemetry: Telemetry | None = None

    # -- orchestration -------------------------------------------------------------

    async def run(self) -> RunState:
        sc = self.sc
        load = sc.load
        timeouts = Timeouts(load.connect_timeout_s, load.first_token_timeout_s,
                            load.idle_timeout_s, load.total_timeout_s)
        limits = load.concurrency
        selfmon = SelfMonitor()
        async with make_http_client(self.transport, limits, sc.target.verify_tls,
                                    load.connect_timeout_s) as http:
            self.client = ChatClient(http, timeouts, self.api_key)
            self.telemetry = Telemetry(http, self.state.base_urls, sc.target.receipts_dir,
                                       sc.telemetry.scrape_interval_s)
            self.writer = RecordWriter(self.out_dir / RECORDS_FILE)
            loop = asyncio.get_running_loop()
            self._install_signals(loop)
            try:
                ready = await self._wait_all_ready(http)
                self.state.model = choose_model(sc.target.model, ready[0])
                await self._calibrate(http)
                self._items = make_workload(sc, self.state.chars_per_token).items()
                await self.telemetry.snapshot("before")
                self.telemetry.start()
                selfmon.start()
                for phase in PHASES:
                    count = load.priming if phase == "priming" else load.measurement
                    await self._run_phase(phase, count)
                    if self._stop_reason:
                        break
                    self.state.phases_done.append(phase)
            except RunInvalidError as exc:
                self.state.invalid = str(exc)
            finally:
                self._remove_signals(loop)
                self.progress.close()
                await selfmon.stop()
                await self.telemetry.stop()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.telemetry.snapshot("after"), 15)
                for task in self._recovering.values():
                    task.cancel()
                self.writer.close()
                self.state.client = selfmon.report(self.writer.count)
                if self.worker_reports:
                    self.state.client = combine_reports(self.state.client, self.worker_reports)
                self.state.finished = time.time()
        return self.state

    async def run_shard(self, phase: str, start_seq: int, count: int) -> dict[str, Any]:
        """One worker process's part of a phase (`--workers`): its seqs, its records.

        The parent waited for readiness and resolved the model; the shard only sends.
        """
        sc = self.sc
        load = sc.load
        timeouts = Timeouts(load.connect_timeout_s, load.first_token_timeout_s,
                            load.idle_timeout_s, load.total_timeout_s)
        selfmon = SelfMonitor()
        async with make_http_client(self.transport, load.concurrency, sc.target.verify_tls,
                                    load.connect_timeout_s) as http:
            self.client = ChatClient(http, timeouts, self.api_key)
            self.writer = RecordWriter(self.out_dir / RECORDS_FILE)
            loop = asyncio.get_running_loop()
            self._install_signals(loop)
            for url in self.state.base_urls:
                self._healthy[url] = asyncio.Event()
                self._healthy[url].set()
            items = make_workload(sc, self.state.chars_per_token).items()
            for _ in range(start_seq):  # the same item for the same seq as one process
                next(items)
            self._items = items
            self._next_seq = start_seq
            if self.start_barrier is not None:
                await loop.run_in_executor(None, self.start_barrier.wait, 120)
            selfmon.start()
            try:
                await self._run_phase(phase, count)
            except RunInvalidError as exc:
                self.state.invalid = str(exc)
            finally:
                self._remove_signals(loop)
                await selfmon.stop()
                for task in self._recovering.values():
                    task.cancel()
                self.writer.close()
        return {**selfmon.report(self.writer.count), "records": self.writer.count,
                "interrupted": self.state.interrupted, "invalid": self.state.invalid}

    def server_document(self) -> dict[str, Any]:
        return self.telemetry.document() if self.telemetry else {}

    async def _wait_all_ready(self, http: httpx.AsyncClient) -> list[ServerReady]:
        ready = []
        for url in self.state.base_urls:
            info = await wait_ready(http, url, self.sc.target.ready_timeout_s)
            self.state.ready.append({"base_url": url, "waited_s": round(info.waited_s, 3)})
            event = asyncio.Event()
            event.set()
            self._healthy[url] = event
            ready.append(info)
        return ready

    async def _calibrate(self, http: httpx.AsyncClient) -> None:
        if self.sc.workload.kind != "long-context":
            return
        self.state.chars_per_token = await calibrate_chars_per_token(
            http, self.state.base_urls[0], self.state.model)

    async def _run_phase(self, phase: str, count: int) -> None:
        if count <= 0:
            return
        if self.workers > 1:
            await self._run_phase_sharded(phase, count)
            return
        self._end_seq = self._next_seq + count
        self.progress.start_phase(phase, count)
        workers = [self._worker(phase) for _ in range(min(self.sc.load.concurrency, count))]
        self._phase_task = asyncio.ensure_future(asyncio.gather(*workers))
        try:
            await self._phase_task
        except asyncio.CancelledError:
            if self._stop_reason is None:
                raise
        finally:
            self._phase_task = None
            self.progress.end_phase()
        if self._stop_reason and self._stop_reason.startswith("invalid: "):
            raise RunInvalidError(self._stop_reason.removeprefix("invalid: "))

    async def _run_phase_sharded(self, phase: str, count: int) -> None:
        """Hand the phase to worker processes; follow their records for progress."""
        from loadgen.engine.shards import run_sharded_phase

        start = self._next_seq
        self.progress.start_phase(phase, count)
        self._phase_task = asyncio.ensure_future(run_sharded_phase(self, phase, start, count))
        try:
            reports = await self._phase_task
        except asyncio.CancelledError:
            if self._stop_reason is None:
                raise
            reports = []
        finally:
            self._phase_task = None
            self.progress.end_phase()
        self.worker_reports += reports
        assert self._items is not None
        for _ in range(count):
            next(self._items)
        self._next_seq = start + count
        invalid = next((r["invalid"] for r in reports if r.get("invalid")), None)
        if invalid:
            raise RunInvalidError(invalid)

    def _stop(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
            if reason.startswith("interrupted"):
                self.state.interrupted = reason
            if self._phase_task is not None:
                self._phase_task.cancel()

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._stop, f"interrupted by {sig.name}")

    def _remove_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)

    # -- one worker ------------------------------------------------------------------

    async def _worker(self, phase: str) -> None:
        assert self._items is not None and self.writer is not None
        stream = self.sc.request.stream
        urls = self.state.base_urls
        shard_index, shard_count = self.shard
        while self._stop_reason is None:
            seq = self._next_seq
            if seq >= self._end_seq:
                return
            self._next_seq = seq + 1
            item = next(self._items)
            if seq % shard_count != shard_index:
                continue
            endpoint = urls[seq % len(urls)]
            await self._pace(endpoint)
            if self._stop_reason is not None:
                return
            body, body_hash = self._body(item)
            record = self._new_record(phase, seq, item, endpoint, body_hash)
            self.in_flight += 1
            self.progress.in_flight = self.in_flight
            shared = self.shared_in_flight
            if shared is not None:
                with shared.get_lock():
                    shared.value += 1
                    record.in_flight = shared.value
            else:
                record.in_flight = self.in_flight
            try:
                retry_after = await self.client.send(record, body, stream)
            except asyncio.CancelledError:
                record.error = f"interrupted: {self._stop_reason or 'cancelled'}"
                record.verdicts = ["interrupted"]
                self.writer.write(record)
                raise
            finally:
                self.in_flight -= 1
                self.progress.in_flight = self.in_flight
                if shared is not None:
                    with shared.get_lock():
                        shared.value -= 1
            record.verdicts = classify(record, self.sc.verdicts)
            self.writer.write(record)
            self.progress.update(record.verdicts[0], record.usage.completion_tokens or 0)
            self._after(record, retry_after)

    def _after(self, record: RequestRecord, retry_after: float | None) -> None:
        """React to what a reply says about the server (back-off, outage)."""
        if retry_after:
            loop = asyncio.get_running_loop()
            self._paused_until[record.endpoint] = loop.time() + min(retry_after, 60.0)
        if record.error and record.error.startswith(_DOWN_PREFIXES):
            self._server_may_be_down(record.endpoint)

    async def _pace(self, endpoint: str) -> None:
        healthy = self._healthy.get(endpoint)
        if healthy is not None and not healthy.is_set():
            await healthy.wait()
        until = self._paused_until.get(endpoint)
        if until is not None:
            delay = until - asyncio.get_running_loop().time()
            if delay > 0:
                await asyncio.sleep(delay)
        if self._throttler is not None:
            async with self._throttle_lock, self._throttler:
                pass

    def _server_may_be_down(self, endpoint: str) -> None:
        if endpoint in self._recovering and not self._recovering[endpoint].done():
            return
        self._healthy[endpoint].clear()
        self._recovering[endpoint] = asyncio.get_running_loop().create_task(
            self._recover(endpoint))

    async def _recover(self, endpoint: str) -> None:
        """Hold new requests to a server that went away until it is ready again."""
        http = self.client.http
        if await probe(http, endpoint, timeout=5.0) is not None:
            self._healthy[endpoint].set()
            return
        self.state.server_restarts += 1
        if self.sc.load.on_server_restart == "invalid":
            self._stop(f"invalid: server {endpoint} went away during the run "
                       "(load.on_server_restart = 'invalid')")
            return
        try:
            await wait_ready(http, endpoint, self.sc.load.restart_ready_timeout_s)
        except RunInvalidError as exc:
            self._stop(f"invalid: server went away and did not come back: {exc}")
            return
        self._healthy[endpoint].set()

    # -- bodies and records ------------------------------------------------------------

    def _body(self, item: WorkItem) -> tuple[bytes, str]:
        cached = self._bodies.get(item.item_id)
        if cached is not None:
            return cached
        req = self.sc.request
        body: dict[str, Any] = {
            "max_tokens": req.max_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p,
        }
        if req.seed is not None:
            body["seed"] = req.seed
        if req.chat_template_kwargs:
            body["chat_template_kwargs"] = req.chat_template_kwargs
        body.update(req.extra_body)
        body.update(item.body)
        body["model"] = self.state.model
        body["messages"] = item.messages
        if item.tools:
            body["tools"] = item.tools
        body["stream"] = req.stream
        if req.stream:
            body["stream_options"] = {"include_usage": True}
        raw = orjson.dumps(body)
        entry = (raw, hashlib.blake2b(raw, digest_size=8).hexdigest())
        if len(self._bodies) < 512:
            self._bodies[item.item_id] = entry
        return entry

    def _new_record(self, phase: str, seq: int, item: WorkItem, endpoint: str,
                    body_hash: str) -> RequestRecord:
        req = self.sc.request
        return RequestRecord(
            run_id=self.state.run_id, scenario=self.sc.name, phase=phase, seq=seq,
            endpoint=endpoint, item_id=item.item_id,
            params={"max_tokens": req.max_tokens, "temperature": req.temperature,
                    "top_p": req.top_p, "seed": req.seed, "stream": req.stream,
                    "approx_prompt_tokens": item.approx_prompt_tokens},
            body_hash=body_hash, greedy=req.temperature == 0.0, worker=self.shard[0],
        )


def combine_reports(parent: dict[str, Any], workers: list[dict[str, Any]]) -> dict[str, Any]:
    """The client's self-monitoring over all worker processes."""
    cpu = sum(w.get("cpu_s") or 0.0 for w in workers)
    records = sum(w.get("records") or 0 for w in workers)
    lags = [w["loop_lag_ms_p99"] for w in workers if w.get("loop_lag_ms_p99") is not None]
    return {
        **parent,
        "workers": len({w.get("worker") for w in workers}) or len(workers),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_request": round(cpu * 1000 / records, 3) if records else None,
        "loop_lag_ms_p99": max(lags) if lags else None,
        "saturated": any(w.get("saturated") for w in workers),
        "per_worker": workers,
    }


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid() % 100000:05d}"

