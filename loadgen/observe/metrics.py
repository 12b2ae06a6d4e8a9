"""Live Prometheus metrics of `run` and `soak` (`--metrics-port`): where operators look.

A soak runs at night; a breach at 03:00 should page someone, not wait for whoever
reads the results in the morning. While the command runs, this serves what it knows
on `/metrics` for Prometheus to scrape and alert on (docker/monitoring/alerts.yml):

- `dsv4_qual_requests_total{phase, verdict}`: requests recorded, by phase and their own
  most severe verdict (run-level verdicts such as `cross_talk` are judged after the
  run, so they show in the round's gate figures, not here); with `--workers` the parent
  counts every worker's records as it reads them from the shared records file;
- `dsv4_qual_requests_in_flight`, `dsv4_qual_phase{dsv4_qual_phase}`;
- `dsv4_qual_round_measured`, `_failures`, `_allowed`, `_failure_rate_upper_bound`,
  `_prove_below` of the current round: live from each reply's own verdicts during the
  measurement, replaced by the gate's figures once the round is judged;
- `dsv4_qual_rounds_total{outcome}` (passed, failed, invalid, interrupted; a `run` is one
  round) and `dsv4_qual_round` (the round's number);
- after the first gate: `dsv4_qual_last_gate_exit_code`, `_timestamp_seconds`, and what the
  server's receipts said (`dsv4_qual_server_receipts`, `dsv4_qual_server_stride_violations`,
  `dsv4_qual_server_layout_info{layout}`);
- `dsv4_qual_running` (1 until the command ends) and
  `dsv4_qual_last_update_timestamp_seconds` (the last time a request was sent or
  recorded, or a phase or round began or ended), so a soak that died or hangs can be
  told from one that finished.

Labels are bounded (phase, verdict, outcome, layout; the scenario, command and node only in
`dsv4_qual_info`). Each instance has its own registry: a test process runs many runs.

A process that exits right after its last gate would take that gate with it before
the next scrape: when someone has scraped the endpoint, `close()` waits (at most about
two scrape intervals, `MAX_LINGER_S` at the most) until one scrape has read the final
values.
"""

from __future__ import annotations

import math
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Enum,
    Gauge,
    Info,
    make_wsgi_app,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer

from loadgen import __version__
from loadgen.bounds import upper_bound
from loadgen.exit_codes import BadInputError, ExitCode
from loadgen.judge.gate.run_report import RunReport
from loadgen.run_facts import node_name
from loadgen.scenario import Scenario
from loadgen.taxonomy import counts_as_infra_error

#: What `dsv4_qual_rounds_total{outcome}` calls each exit code of a run.
OUTCOMES: dict[int, str] = {
    ExitCode.PASSED: "passed",
    ExitCode.GATE_FAILED: "failed",
    ExitCode.RUN_INVALID: "invalid",
    ExitCode.INTERRUPTED: "interrupted",
}
#: `dsv4_qual_phase`: idle between runs, starting while the server is awaited.
PHASES = ("idle", "starting", "priming", "measurement", "reference")
#: The phase the gate counts.
GATED_PHASE = "measurement"
#: The longest wait for a last scrape when the command ends.
MAX_LINGER_S = 60.0


def outcome_of(exit_code: int) -> str:
    """A run's exit code as a rounds_total outcome (anything else is invalid)."""
    return OUTCOMES.get(exit_code, "invalid")


@dataclass(frozen=True)
class GateFacts:
    """What the last judged run said: its exit code and the server's receipts."""

    exit_code: int
    at: float
    receipts: int  # model-process receipts of the server start that were counted
    stride_violations: int
    layout: str | None


class _LastGate:
    """Families that exist only once a run was judged (a missing gate is not a pass)."""

    def __init__(self) -> None:
        self.facts: GateFacts | None = None

    def collect(self) -> Iterable[Metric]:
        facts = self.facts
        if facts is None:
            return
        yield GaugeMetricFamily("dsv4_qual_last_gate_exit_code",
                                "Exit code of the last judged run (0 passed, 1 gate failed, "
                                "2 invalid, 130 interrupted).", value=facts.exit_code)
        yield GaugeMetricFamily("dsv4_qual_last_gate_timestamp_seconds",
                                "When the last run was judged (Unix time).", value=facts.at)
        yield GaugeMetricFamily("dsv4_qual_server_receipts",
                                "Patch receipts of the server start the last run counted.",
                                value=facts.receipts)
        if facts.receipts:
            yield GaugeMetricFamily("dsv4_qual_server_stride_violations",
                                    "C128A stride violations the counted receipts report.",
                                    value=facts.stride_violations)
        if facts.layout:
            layout = GaugeMetricFamily("dsv4_qual_server_layout_info",
                                       "The C128A layout the server ran in the last run.",
                                       labels=["layout"])
            layout.add_metric([facts.layout], 1)
            yield layout


class _ScrapeWatch:
    """Which scrapes began after the final values were set. `begin` is registered
    before every other collector and `end` after them, so a scrape that `end` marks has
    read every family after `begin` ran."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self.started = 0
        self.times: list[float] = []
        self.final_from: int | None = None
        self.final_read = threading.Event()
        outer = self

        class _Begin:
            def collect(self) -> Iterable[Metric]:
                with outer._lock:
                    outer._local.index = outer.started
                    outer.started += 1
                    outer.times = [*outer.times[-1:], time.monotonic()]
                return []

        class _End:
            def collect(self) -> Iterable[Metric]:
                index = getattr(outer._local, "index", -1)
                if outer.final_from is not None and index >= outer.final_from:
                    outer.final_read.set()
                return []

        self.begin, self.end = _Begin(), _End()

    def mark_final(self) -> None:
        with self._lock:
            self.final_from = self.started

    def linger_bound(self) -> float:
        """How long to wait for a last scrape: none when nobody scraped; about two of
        the scraper's intervals when it scraped twice; else the most."""
        with self._lock:
            times = list(self.times)
        if not times:
            return 0.0
        if len(times) < 2:
            return MAX_LINGER_S
        return min(MAX_LINGER_S, max(2.0, 2 * (times[1] - times[0]) + 1.0))


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not news."""


class LiveMetrics:
    """The metrics of one `run` or `soak` process; the engine's RunObserver as well."""

    def __init__(self, command: str, scenario: Scenario) -> None:
        self.registry = CollectorRegistry()
        self._watch = _ScrapeWatch()
        self._last_gate = _LastGate()
        self._server: ThreadingWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._fail_on: frozenset[str] = frozenset()
        self._live = [0, 0]  # failures, measured of the current round's measurement
        self._bound: tuple[int, int, float] | None = None  # cache of the live bound
        self._final_bound: float | None = None  # the gate's, once the round is judged
        self._judged = False
        self._round_number = 0
        self._next_round: int | None = None
        self._children: dict[tuple[str, str], Any] = {}
        r = self.registry
        r.register(self._watch.begin)
        self._info = Info("dsv4_qual", "The command serving these metrics.", registry=r)
        # `node`: the alerts join it onto every alert (a central Prometheus scrapes many
        # nodes, and an instance such as soak:9464 names none).
        self._info.info({"command": command, "scenario": scenario.name or "",
                         "role": scenario.gate.role, "version": __version__,
                         "node": node_name() or ""})
        self._running = Gauge("dsv4_qual_running",
                              "1 while the run or soak is in progress, 0 once it has ended.",
                              registry=r)
        self._heartbeat = Gauge("dsv4_qual_last_update_timestamp_seconds",
                                "When the load generator last sent or recorded a request, or "
                                "began or ended a phase or round (Unix time).",
                                registry=r)
        self._requests = Counter("dsv4_qual_requests",
                                 "Requests recorded, by phase and their own most severe "
                                 "verdict.", ["phase", "verdict"], registry=r)
        self._in_flight = Gauge("dsv4_qual_requests_in_flight", "Requests in flight.",
                                registry=r)
        self._phase = Enum("dsv4_qual_phase", "What the current run is doing.",
                           states=list(PHASES), registry=r)
        self._rounds = Counter("dsv4_qual_rounds", "Judged runs (soak rounds) by outcome.",
                               ["outcome"], registry=r)
        for outcome in OUTCOMES.values():  # from 0, so increase() sees the first one
            self._rounds.labels(outcome)
        self._round = Gauge("dsv4_qual_round", "The current (or last) round's number.",
                            registry=r)
        self._measured = Gauge("dsv4_qual_round_measured",
                               "Measured requests of the current round so far (the gate's "
                               "count once judged).", registry=r)
        self._failures = Gauge("dsv4_qual_round_failures",
                               "Gated failures of the current round so far (the gate's count "
                               "once judged).", registry=r)
        self._allowed = Gauge("dsv4_qual_round_allowed",
                              "Gated failures the current round's gate allows.", registry=r)
        self._upper = Gauge("dsv4_qual_round_failure_rate_upper_bound",
                            "Exact one-sided 95% upper bound of the current round's failure "
                            "rate.", registry=r)
        self._upper.set_function(self._upper_bound)
        self._prove_below = Gauge("dsv4_qual_round_prove_below",
                                  "The rate the current round's bound must fall below "
                                  "(candidates; NaN for a control).", registry=r)
        r.register(self._last_gate)
        r.register(self._watch.end)
        self._running.set(1)
        self._beat()

    # -- serving ---------------------------------------------------------------------

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        """Listen on host:port; BadInputError (exit 3) when that cannot be done."""
        try:
            family, _, _, _, sockaddr = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

            class _Server(ThreadingWSGIServer):
                address_family = family
                # close() waits for a scrape being answered, so the last one arrives whole.
                daemon_threads = False

            server = make_server(str(sockaddr[0]), port, make_wsgi_app(self.registry), _Server,
                                 handler_class=_QuietHandler)
        except OSError as exc:
            raise BadInputError(f"--metrics-port {port}: cannot listen on {host}:{port} "
                                f"({exc.strerror or exc})") from None
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever,
                                        name="dsv4-qual-metrics", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int | None:
        return self._server.server_address[1] if self._server is not None else None

    def close(self, *, linger: bool = True,
              should_stop: Callable[[], bool] | None = None) -> None:
        """The command has ended: say so, let a scraper read it once, stop serving."""
        self._running.set(0)
        self._phase.state("idle")
        self._in_flight.set(0)
        self._beat()
        self._watch.mark_final()
        if self._server is None:
            return
        if linger:
            self._wait_for_last_scrape(should_stop)
        self._server.shutdown()
        self._server.server_close()  # joins the handlers of scrapes in progress
        if self._thread is not None:
            self._thread.join()
        self._server = None

    def _wait_for_last_scrape(self, should_stop: Callable[[], bool] | None) -> None:
        bound = self._watch.linger_bound()
        start = time.monotonic()
        said = False
        while not self._watch.final_read.wait(0.1):
            elapsed = time.monotonic() - start
            if elapsed >= bound or (should_stop is not None and should_stop()):
                return
            if not said and elapsed >= 1.0:
                said = True
                print(f"dsv4-qual: metrics: waiting up to {bound:.0f} s for a last scrape of "
                      "the final values", file=sys.stderr, flush=True)

    # -- the command's runs ----------------------------------------------------------

    def round_started(self, number: int) -> None:
        """The number of the soak round that starts next (a resumed soak continues)."""
        self._next_round = number

    def run_started(self, scenario: Scenario) -> None:
        """A run begins: the round's figures start again from zero."""
        gate = scenario.gate
        self._round_number = self._next_round or self._round_number + 1
        self._next_round = None
        self._round.set(self._round_number)
        self._fail_on = frozenset(str(v) for v in gate.gated())
        self._live = [0, 0]
        self._final_bound = None
        self._judged = False
        self._measured.set(0)
        self._failures.set(0)
        self._allowed.set(gate.allowed)
        self._prove_below.set(gate.prove_below if gate.role == "candidate" else math.nan)
        self._phase.state("starting")
        self._beat()

    def run_judged(self, report: RunReport, exit_code: int) -> None:
        """The run's gate decided: its figures replace the live ones."""
        gate = report.gate
        self._judged = True
        self._final_bound = gate.upper_bound_95
        self._measured.set(gate.measured)
        self._failures.set(gate.failures)
        self._allowed.set(gate.allowed)
        self._rounds.labels(outcome_of(exit_code)).inc()
        counted = report.server.receipts.model_processes
        self._last_gate.facts = GateFacts(
            exit_code=exit_code, at=time.time(), receipts=len(counted),
            stride_violations=sum(p.violations for p in counted),
            layout=report.server.layout)
        self._phase.state("idle")
        self._beat()

    # -- the engine's RunObserver ----------------------------------------------------

    def phase_started(self, phase: str, planned: int) -> None:
        if phase in PHASES:
            self._phase.state(phase)
        self._beat()

    def request_done(self, phase: str, verdicts: Sequence[str]) -> None:
        key = (phase, verdicts[0])
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._requests.labels(*key)
        child.inc()
        # The gate's rate is of replies: neither an interrupted request nor one the
        # model never answered (an infrastructure error) counts as measured.
        if (phase == GATED_PHASE and not self._judged and "interrupted" not in verdicts
                and not counts_as_infra_error(verdicts)):
            self._live[1] += 1
            self._measured.set(self._live[1])
            if self._fail_on.intersection(verdicts):
                self._live[0] += 1
                self._failures.set(self._live[0])
        self._beat()

    def in_flight(self, count: int) -> None:
        self._in_flight.set(count)
        self._beat()

    # -- helpers ---------------------------------------------------------------------

    def _beat(self) -> None:
        self._heartbeat.set(time.time())

    def _upper_bound(self) -> float:
        """At scrape time: the gate's bound once judged, else the live one (cached)."""
        if self._judged:
            return math.nan if self._final_bound is None else self._final_bound
        failures, measured = self._live
        if measured <= 0:
            return math.nan
        cached = self._bound
        if cached is None or cached[:2] != (failures, measured):
            value = upper_bound(failures, measured)
            cached = self._bound = (failures, measured, math.nan if value is None else value)
        return cached[2]
