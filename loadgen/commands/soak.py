"""`dsv4-qual soak`: measurement rounds against one long-lived server, into the history.

#52448's failure rate climbed with the server's uptime (its first ~256 requests were
clean), so a soak primes once per server start, not once per round: priming a
server that has been busy for hours would only waste time, and not priming a fresh
one would measure its clean cold start. A server start is read from the server
(the dsv4-qual server id in /metrics, else `process_start_time_seconds`; without
either, a readiness loss between rounds or a restart the run saw). Each round is one
ordinary run (`run_scenario`) in `<out>/<soak id>/round-NNNN`, written to the history
when it starts and when it ends.

Resuming: the unfinished soak of a scenario in an out dir is found again in the
history, and a restarted command continues its round count. A round whose process
died is rebuilt from its records (flushed as each request completed, so only the
requests in flight are lost) and recorded as `partial`. An unfinished soak whose
duration has run out is closed instead (`expired`) and a new one starts, so a
nightly job running the same command every night never continues last night's.

Ends: after `rounds` complete rounds, at `duration` after the soak first started
(the last round runs to its end), on the first gate breach with `stop_on_breach`,
or on SIGINT/SIGTERM (exit 130; run the same command again to continue).

Exit code: 130 if interrupted; else 1 if any complete round failed its gate (a
breach is a finding about the server); else 2 if any complete round was invalid or
none completed; else 0.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from loadgen import __version__
from loadgen.commands import interrupts
from loadgen.commands.run import check_target, run_scenario
from loadgen.durations import format_duration, parse_duration
from loadgen.exit_codes import BadInputError, ExitCode
from loadgen.files import write_json
from loadgen.history import History, RoundRow, Soak, is_postgres, round_results
from loadgen.history.identity import node_identity, server_columns
from loadgen.history.spool import SPOOL_FILE, SpooledHistory
from loadgen.history.statuses import RoundStatus, SoakStatus
from loadgen.judge.gate.gate import NOTHING_SENT
from loadgen.judge.gate.run_report import RunReport
from loadgen.report.outcome import rebuild_reports
from loadgen.results import (
    RECORDS_FILE,
    claimed,
    is_run_dir,
    load_run,
    load_server,
    new_run_id,
    results_root,
    write_run,
)
from loadgen.results.soak import SOAK_FILE
from loadgen.scenario import Scenario
from loadgen.shipping import Shipper
from loadgen.targets.embedded import serving
from loadgen.targets.epochs import endpoint_looks
from loadgen.targets.restarts import StartTracker

if TYPE_CHECKING:
    from loadgen.observe.metrics import LiveMetrics

DIED_NOTE = "the soak process died during this round; rebuilt from its records on resume"


@dataclass(frozen=True)
class SoakPlan:
    duration_s: float | None
    rounds: int | None
    stop_on_breach: bool

    def describe(self) -> str:
        """The plan as the start line says it: a plan, never a result ("runs until 6
        rounds are complete, for 8h at most")."""
        duration = format_duration(self.duration_s) if self.duration_s else None
        if self.rounds and duration:
            plan = f"runs {rounds_complete(self.rounds, 'until')}, for {duration} at most"
        elif self.rounds:
            plan = f"runs {rounds_complete(self.rounds, 'until')}"
        else:
            plan = f"runs for {duration}"
        return plan + (", stopping at the first breach" if self.stop_on_breach else "")


def rounds_complete(count: int, when: str = "") -> str:
    """'1 round complete', '6 rounds complete'; with `until`: 'until 1 round is complete'."""
    noun = "round" if count == 1 else "rounds"
    if when == "until":
        return f"until {count} {noun} {'is' if count == 1 else 'are'} complete"
    return f"{count} {noun} complete"


@dataclass
class SoakOutcome:
    soak_id: str
    out_dir: Path
    exit_code: int
    status: SoakStatus
    rounds: list[RoundRow]


@dataclass(frozen=True)
class Stop:
    """Why the rounds stopped, and what that makes the soak."""

    reason: str
    status: SoakStatus = SoakStatus.FINISHED

    @property
    def interrupted(self) -> bool:
        return self.status == SoakStatus.INTERRUPTED


INTERRUPTED = Stop("interrupted", SoakStatus.INTERRUPTED)


def make_plan(scenario: Scenario, duration: str | None, rounds: int | None,
              stop_on_breach: bool | None) -> SoakPlan:
    """Command line over the scenario's [soak]; at least one of duration and rounds."""
    cfg = scenario.soak
    duration = duration or (cfg.duration if cfg else None)
    rounds = rounds if rounds is not None else (cfg.rounds if cfg else None)
    if stop_on_breach is None:
        stop_on_breach = bool(cfg and cfg.stop_on_breach)
    if rounds is not None and rounds < 1:
        raise BadInputError(f"--rounds {rounds}: must be at least 1")
    try:
        duration_s = parse_duration(duration) if duration else None
    except ValueError as exc:
        raise BadInputError(f"--duration: {exc}") from None
    if duration_s is None and rounds is None:
        raise BadInputError("soak needs --duration D or --rounds N (or soak.duration / "
                            "soak.rounds in the scenario)")
    return SoakPlan(duration_s, rounds, stop_on_breach)


def default_soak_dir(scenario: Scenario) -> Path:
    """Stable, so that running the same command again resumes the soak."""
    return results_root() / f"soak-{scenario.name or 'run'}"


def round_dir(soak_dir: Path, number: int) -> Path:
    return soak_dir / f"round-{number:04d}"


def soak_exit_code(rounds: list[RoundRow], interrupted: bool) -> int:
    if interrupted:
        return int(ExitCode.INTERRUPTED)
    complete = [r for r in rounds if r.status == RoundStatus.COMPLETE]
    codes = {r.exit_code for r in complete}
    if ExitCode.GATE_FAILED in codes:
        return int(ExitCode.GATE_FAILED)
    if not complete or codes - {ExitCode.PASSED}:
        return int(ExitCode.RUN_INVALID)
    return int(ExitCode.PASSED)


def recover_round(history: History | SpooledHistory, soak_id: str,
                  row: RoundRow) -> None:
    """A round left `running` by a process that died: rebuild its reports, record it partial."""
    directory = Path(row.results_dir)
    report: RunReport | None = None
    columns: dict[str, Any] = {}
    if is_run_dir(directory):
        with contextlib.suppress(BadInputError, OSError):
            scenario, facts = load_run(directory)
            if not facts.finished:
                facts.interrupted = facts.interrupted or DIED_NOTE
                write_run(directory, scenario, facts)
            report = rebuild_reports(directory).report
            columns = server_columns(report.server, report.run.model)
    results, verdicts = round_results(report) if report is not None else ({}, {})
    results.update(columns)
    complete = report is not None and report.gate.exit_code != ExitCode.INTERRUPTED
    history.finish_round(soak_id, int(row.round),
                         status=RoundStatus.COMPLETE if complete else RoundStatus.PARTIAL,
                         note=None if complete else DIED_NOTE,
                         ended=_mtime(directory) or time.time(), results=results,
                         verdicts=verdicts)


def _mtime(directory: Path) -> float | None:
    records = directory / RECORDS_FILE
    return records.stat().st_mtime if records.exists() else None


class SoakSession:
    """One invocation of `dsv4-qual soak`: a new soak, or the continuation of one."""

    def __init__(self, scenario: Scenario, plan: SoakPlan, out_dir: Path,
                 history: History | SpooledHistory, *, quiet: bool, transport: str,
                 echo: Any = print, observer: LiveMetrics | None = None,
                 shipper: Shipper | None = None) -> None:
        self.scenario = scenario.model_copy(update={"qualify": None, "soak": None})
        # Where every round of this invocation runs, and the protocol it runs.
        self.identity = node_identity(self.scenario)
        self.plan = plan
        self.out_dir = out_dir
        self.history = history
        self.quiet = quiet
        self.transport = transport
        self.echo = echo
        self.observer = observer  # the live metrics of --metrics-port, if any
        self.shipper = shipper  # --ship-to: each finished round's reports, copied
        self.soak: Soak | None = None
        self.starts = StartTracker()

    # -- the soak's identity ----------------------------------------------------------

    @property
    def soak_dir(self) -> Path:
        assert self.soak is not None
        return self.out_dir / self.soak.soak_id

    def open(self, new: bool) -> None:
        soak = self.history.unfinished_soak(self.scenario.name, str(self.out_dir))
        if soak is not None and new:
            self.history.update_soak(soak.soak_id, status=SoakStatus.ABANDONED, ended=time.time())
            self.echo(f"soak {soak.soak_id}: abandoned (--new)")
            soak = None
        if soak is not None and self.plan.duration_s is not None and \
                time.time() >= soak.started + self.plan.duration_s:
            self._close_expired(soak)
            soak = None
        if soak is None:
            # The random tail keeps ids apart across a fleet's nodes sharing one database
            # (containers started by the same cron line: same second, same pid).
            soak = Soak(soak_id=f"{self.scenario.name or 'soak'}-{new_run_id()}-"
                                f"{secrets.token_hex(2)}",
                        scenario=self.scenario.name, out_dir=str(self.out_dir), started=time.time(),
                        status=SoakStatus.RUNNING, duration_s=self.plan.duration_s,
                        rounds_target=self.plan.rounds, stop_on_breach=self.plan.stop_on_breach)
            self.history.add_soak(soak, __version__)
            self.soak = soak
            self.echo(f"soak {soak.soak_id}: {self.plan.describe()}; history "
                      f"{self.history.path}; rounds in {self.soak_dir}")
        else:
            self.soak = soak
            self._resume(soak)

    def _close_expired(self, soak: Soak) -> None:
        """An unfinished soak past its duration (killed last night): close, never continue."""
        for row in self.history.rounds(soak.soak_id):
            if row.status == RoundStatus.RUNNING:
                recover_round(self.history, soak.soak_id, row)
        rounds = self.history.rounds(soak.soak_id)
        self.history.update_soak(soak.soak_id, status=SoakStatus.EXPIRED,
                                 ended=max((r.ended or r.started for r in rounds),
                                           default=soak.started),
                                 exit_code=soak_exit_code(rounds, interrupted=False))
        self.echo(f"soak {soak.soak_id}: its duration ran out while it was stopped; closed "
                  "(expired), starting a new soak")

    def _resume(self, soak: Soak) -> None:
        self.history.update_soak(soak.soak_id, status=SoakStatus.RUNNING,
                                 duration_s=self.plan.duration_s,
                                 rounds_target=self.plan.rounds,
                                 stop_on_breach=int(self.plan.stop_on_breach))
        for row in self.history.rounds(soak.soak_id):
            if row.status == RoundStatus.RUNNING:
                recover_round(self.history, soak.soak_id, row)
                self.echo(f"soak {soak.soak_id}: round {row.round} was cut short; "
                          "recorded as partial")
        rounds = self.history.rounds(soak.soak_id)
        if rounds:
            server_doc: dict[str, Any] = {}
            with contextlib.suppress(BadInputError, OSError, ValueError):
                server_doc = load_server(Path(rounds[-1].results_dir))
            self.starts.resume(orjson.loads(rounds[-1].server_starts or "{}"),
                               endpoint_looks(server_doc))
        done = sum(1 for r in rounds if r.status == RoundStatus.COMPLETE)
        self.echo(f"soak {soak.soak_id}: resuming after round "
                  f"{rounds[-1].round if rounds else 0} ({done} complete)")

    # -- rounds ------------------------------------------------------------------------

    def _should_stop(self) -> str | None:
        assert self.soak is not None
        rounds = self.history.rounds(self.soak.soak_id)
        complete = sum(1 for r in rounds if r.status == RoundStatus.COMPLETE)
        if self.plan.rounds is not None and complete >= self.plan.rounds:
            return rounds_complete(complete)
        if self.plan.duration_s is not None and \
                time.time() >= self.soak.started + self.plan.duration_s:
            return f"duration {format_duration(self.plan.duration_s)} reached"
        return None

    def _next_number(self) -> int:
        assert self.soak is not None
        rounds = self.history.rounds(self.soak.soak_id)
        return (int(rounds[-1].round) + 1) if rounds else 1

    def run_round(self, base_urls: list[str]) -> dict[str, Any]:
        """Observe the server, prime if it started anew, run one round, record it."""
        assert self.soak is not None
        number = self._next_number()
        reasons, observations = self.starts.before_round(base_urls,
                                                         self.scenario.target.verify_tls)
        new_start = bool(reasons)
        starts = {o.base_url: o.start_time for o in observations}
        priming = self.scenario.load.priming if new_start else 0
        directory = round_dir(self.soak_dir, number)
        round_scenario = self.scenario.with_overrides(base_urls=base_urls)
        if not new_start:
            round_scenario = round_scenario.primed_earlier()
        self.echo(f"round {number}: " + (f"priming {priming} ({'; '.join(reasons)})"
                                          if new_start else "no priming (same server start)"))
        self.history.start_round(self.soak.soak_id, number, started=time.time(),
                                 scenario=self.scenario.name, results_dir=str(directory),
                                 priming=priming, restart_detected=new_start,
                                 server_starts=starts, identity=self.identity)
        if self.observer is not None:
            self.observer.round_started(number)
        try:
            outcome = run_scenario(round_scenario, directory, quiet=self.quiet,
                                   transport=self.transport, observer=self.observer,
                                   side=f"round {number}")
        except KeyboardInterrupt:
            interrupts.hold()
            recover_round(self.history, self.soak.soak_id,
                          RoundRow(soak_id=self.soak.soak_id, round=number,
                                   status=RoundStatus.RUNNING, started=time.time(),
                                   results_dir=str(directory)))
            raise
        report = outcome.report
        interrupted = outcome.exit_code == ExitCode.INTERRUPTED
        results, verdicts = round_results(report)
        results.update(server_columns(report.server, report.run.model))
        self.history.finish_round(
            self.soak.soak_id, number,
            status=RoundStatus.PARTIAL if interrupted else RoundStatus.COMPLETE,
            # An invalid round says why (the fleet's verdict and `history` show it).
            note=report.run.interrupted if interrupted else report.run.invalid,
            ended=time.time(), results=results, verdicts=verdicts)
        self.starts.after_round(report.server.looks, bool(report.run.server_restarts),
                                observations)
        if self.shipper is not None:
            print(self.shipper.ship(directory, f"{self.soak_dir.name}/{directory.name}"),
                  file=sys.stderr, flush=True)
        # A signal held since the round finished: the round is complete and recorded, and
        # the soak stops after it.
        # Ready servers, and yet nothing could be sent (the requests cannot fit their
        # context, the model is not served): every later round would end the same way.
        refused = (report.gate.no_rate == NOTHING_SENT and not interrupted
                   and report.run.invalid is not None)
        return {"round": number, "exit_code": outcome.exit_code,
                "interrupted": interrupted or bool(outcome.interrupted_after),
                "refused": report.run.invalid if refused else None}

    def loop(self, base_urls: list[str]) -> Stop:
        """Rounds until the plan says stop."""
        while True:
            reason = self._should_stop()
            if reason:
                return Stop(reason)
            try:
                interrupts.resume()  # raises for a signal held since the last round
                result = self.run_round(base_urls)
            except KeyboardInterrupt:
                return INTERRUPTED
            if result["interrupted"]:
                return INTERRUPTED
            if result["refused"]:
                return Stop(f"round {result['round']} sent nothing: {result['refused']}")
            if self.plan.stop_on_breach and result["exit_code"] == ExitCode.GATE_FAILED:
                return Stop(f"gate breached in round {result['round']} (--stop-on-breach)",
                            SoakStatus.STOPPED_ON_BREACH)

    def finish(self, stop: Stop) -> SoakOutcome:
        assert self.soak is not None
        rounds = self.history.rounds(self.soak.soak_id)
        code = soak_exit_code(rounds, stop.interrupted)
        status = stop.status
        self.history.update_soak(self.soak.soak_id, status=status, ended=time.time(),
                                 exit_code=code)
        write_json(self.soak_dir / SOAK_FILE, {
            "soak_id": self.soak.soak_id, "scenario": self.scenario.name,
            "history": str(self.history.path), "status": status, "stopped": stop.reason,
            "exit_code": code, "plan": self.plan.__dict__,
            "rounds": [{"round": r.round, "status": r.status, "exit_code": r.exit_code,
                        "measured": r.measured, "gated_failures": r.gated_failures,
                        "upper_bound_95": r.upper_bound_95, "priming": r.priming,
                        "vllm_version": r.vllm_version, "c128a_layout": r.c128a_layout,
                        "results_dir": r.results_dir} for r in rounds],
        })
        return SoakOutcome(self.soak.soak_id, self.soak_dir, code, status, rounds)


def open_history(target: str | Path, out_dir: Path) -> History | SpooledHistory:
    """A SQLite file as it is; a fleet's PostgreSQL through a spool in the soak's --out."""
    if is_postgres(target):
        return SpooledHistory(str(target), out_dir / SPOOL_FILE)
    return History(Path(target))


def soak(scenario: Scenario, plan: SoakPlan, out: Path | None, history_path: str | Path, *,
         quiet: bool = False, transport: str = "auto", new: bool = False,
         observer: LiveMetrics | None = None, shipper: Shipper | None = None) -> SoakOutcome:
    """Run (or continue) the soak of `scenario` in `out`; see the module docstring.
    `observer` (the metrics of `--metrics-port`) sees every round; `shipper`
    (`--ship-to`) copies each finished round's reports."""
    out_dir = (out or default_soak_dir(scenario)).resolve()
    check_target(scenario)
    interrupts.resume()
    with claimed(out_dir, "soak", fresh=False):
        history = open_history(history_path, out_dir)
        try:
            session = SoakSession(scenario, plan, out_dir, history, quiet=quiet,
                                  transport=transport, observer=observer, shipper=shipper)
            session.open(new)
            try:
                # One server for the whole soak (uptime is what a soak measures); every
                # round's server.json holds the receipts it read, so an embedded target's
                # own receipts folder goes when the soak ends.
                with serving(scenario, quiet=quiet) as (served, embedded):
                    try:
                        if embedded is not None:
                            session.scenario = session.scenario.with_overrides(
                                base_urls=served.target.base_urls,
                                receipts_dir=served.target.receipts_dir)
                        stop = session.loop(served.target.base_urls)
                    finally:
                        interrupts.hold()  # the soak's own bookkeeping is written whole
            except KeyboardInterrupt:  # also while the embedded target was starting
                interrupts.hold()
                stop = INTERRUPTED
            outcome = session.finish(stop)
            why = "" if stop.reason == outcome.status else f" ({stop.reason})"
            session.echo(f"soak {outcome.soak_id}: {outcome.status}{why}; "
                         f"exit {outcome.exit_code}")
            return outcome
        finally:
            history.close()


def show_rounds(outcome: SoakOutcome) -> None:
    """The rounds as a table on the terminal, and as trend.png beside them."""
    if not outcome.rounds:
        return
    from loadgen.report.trend import console, round_table, write_trend_plot  # matplotlib

    terminal = console()
    terminal.print(round_table(outcome.rounds, terminal.width))
    write_trend_plot(outcome.rounds, outcome.out_dir / "trend.png")


def history_default(out: Path | None, scenario: Scenario) -> Path:
    """Next to the soaks, shared by every soak under the same results directory."""
    base = (out or default_soak_dir(scenario)).resolve().parent
    return base / "soak-history.sqlite"
