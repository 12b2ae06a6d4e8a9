"""`dsv4-qual run`: check the input, run the engine, write server facts and reports, exit code.

Everything that can be checked before a request is sent is checked first (a target
given, the API key variable set, the results directory writable), so bad input
exits 3 without touching the server and without leaving a results directory.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from loadgen.commands import interrupts
from loadgen.engine import loop
from loadgen.engine.runner import Runner
from loadgen.exit_codes import BadInputError
from loadgen.report.outcome import RunOutcome, one_line, rebuild_reports
from loadgen.report.run_text import run_level_lines
from loadgen.results import (
    claimed,
    default_out_dir,
    new_run_id,
    write_run,
    write_server,
)
from loadgen.scenario import Scenario
from loadgen.targets.embedded import serving
from loadgen.targets.epochs import select_receipts

if TYPE_CHECKING:
    from loadgen.observe.metrics import LiveMetrics


def api_key_from_env(scenario: Scenario) -> str | None:
    name = scenario.target.api_key_env
    if not name:
        return None
    value = os.environ.get(name)
    if not value:
        raise BadInputError(f"target.api_key_env: environment variable {name} is not set")
    return value


def check_target(scenario: Scenario) -> None:
    if not scenario.target.base_urls and scenario.target.sim is None:
        raise BadInputError("no target: give --base-url URL or set target.base_urls "
                            "(or [target.sim]) in the scenario")


def run_scenario(
    scenario: Scenario,
    out: Path | None = None,
    *,
    quiet: bool = False,
    transport: str = "auto",
    echo: bool = True,
    workers: int = 1,
    html: bool = True,
    observer: LiveMetrics | None = None,
    side: str | None = None,
) -> RunOutcome:
    """Run a scenario end to end and write every report; never raises on a bad server.
    `observer` (the metrics of `--metrics-port`) is told as the run goes and judged;
    `side` (a qualification's `control` or `candidate`, a soak's `round N`) starts every
    line the run prints."""
    check_target(scenario)
    api_key = api_key_from_env(scenario)
    run_id = new_run_id()
    with claimed(out or default_out_dir("", scenario.name, run_id), "run") as out_dir:
        return _run_in(scenario, out_dir, run_id, api_key, quiet=quiet, transport=transport,
                       echo=echo, workers=workers, html=html, observer=observer, side=side)


def _run_in(scenario: Scenario, out_dir: Path, run_id: str, api_key: str | None, *,
            quiet: bool, transport: str, echo: bool, workers: int, html: bool,
            observer: LiveMetrics | None, side: str | None) -> RunOutcome:
    """The run in its results directory, held for it (`claimed`)."""
    # An embedded target writes its receipts where the run reads them; a quiet run's
    # target logs nothing (what its guard saw is in the receipt, so in the reports).
    with serving(scenario, quiet=quiet) as (scenario, embedded):
        if observer is not None:
            observer.run_started(scenario)
        runner = Runner(scenario, out_dir, run_id, quiet=quiet, transport=transport,
                        api_key=api_key, workers=workers, observer=observer, side=side)
        write_run(out_dir, scenario, runner.facts)
        try:
            facts = loop.run(runner.run())
        except KeyboardInterrupt:  # a second Ctrl-C before the handlers were in place
            facts = runner.facts
            facts.interrupted = facts.interrupted or "interrupted by SIGINT"
        finally:
            if embedded is not None:
                embedded.stop()  # its receipt now holds the guard's last counts
        # The run is over: a signal from here on is held, so the reports are written whole
        # and the exit code printed is the one returned (a caller that goes on resumes them).
        interrupts.hold()
        # server.json keeps every receipt whole, so an embedded target's own folder can go.
        write_server(out_dir, select_receipts(runner.server_document()))
    write_run(out_dir, scenario, facts)
    outcome = rebuild_reports(out_dir, html=html)
    outcome.interrupted_after = interrupts.HELD.signal
    if observer is not None:
        observer.run_judged(outcome.report, outcome.exit_code)
    if echo:
        if not quiet:  # the counts the progress lines gave, as the run-level rules revised them
            for line in run_level_lines(outcome.report):
                print(f"{side}: {line}" if side else line, file=sys.stderr, flush=True)
        line = one_line(outcome.report)
        print(f"{side}: {line}" if side else line, file=sys.stdout, flush=True)
        if outcome.interrupted_after:
            print(f"dsv4-qual: {outcome.interrupted_after} came after the run had finished: "
                  "its reports are complete", file=sys.stderr, flush=True)
    return outcome


@contextlib.contextmanager
def live_metrics(command: str, scenario: Scenario, port: int,
                 host: str) -> Iterator[LiveMetrics | None]:
    """Prometheus metrics on host:port while the block runs (`--metrics-port`; 0: none).

    Listening comes first, so a port in use is bad input (exit 3) before anything is
    sent. At the end a scraper gets one last look at the final values, unless the block
    was interrupted or a signal arrives meanwhile."""
    if not port:
        yield None
        return
    from loadgen.observe.metrics import LiveMetrics

    metrics = LiveMetrics(command, scenario)
    metrics.serve(port, host)
    try:
        yield metrics
    except BaseException:
        metrics.close(linger=False)
        raise
    metrics.close(should_stop=lambda: interrupts.HELD.signal is not None)
