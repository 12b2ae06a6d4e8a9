"""One `dsv4-qual run`: prepare the results directory, run, report, exit code.

Everything that can be checked before a request is sent is checked here (results
directory writable, API key variable set, a target given), so bad input exits 3
without touching the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.engine.runner import Runner, new_run_id
from loadgen.exit_codes import EXIT_WORDS, BadInputError, ExitCode
from loadgen.records import RECORDS_FILE
from loadgen.report import write_reports
from loadgen.report.build import RUN_FILE, SERVER_FILE, write_json
from loadgen.scenario import Scenario
from loadgen.target.embedded import EmbeddedTarget, start_embedded
from loadgen.target.epochs import select_receipts


@dataclass
class RunOutcome:
    out_dir: Path
    exit_code: int
    summary: dict[str, Any]


def prepare_out_dir(out: Path) -> Path:
    """Create the results directory and prove it writable, before any request."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise BadInputError(f"--out {out}: results directory not writable "
                            f"({exc.strerror or exc})") from None
    if (out / RECORDS_FILE).exists() and (out / RECORDS_FILE).stat().st_size:
        raise BadInputError(f"--out {out}: already holds a run's records; "
                            "choose a new directory (results are never overwritten)")
    return out


def api_key_from_env(scenario: Scenario) -> str | None:
    name = scenario.target.api_key_env
    if not name:
        return None
    value = os.environ.get(name)
    if not value:
        raise BadInputError(f"target.api_key_env: environment variable {name} is not set")
    return value


RESULTS_ROOT_ENV = "DSV4_QUAL_RESULTS_ROOT"


def results_root() -> Path:
    """Where results directories go unless --out says otherwise: `results/`, or the
    folder DSV4_QUAL_RESULTS_ROOT names (the loadgen image sets it to its volume)."""
    return Path(os.environ.get(RESULTS_ROOT_ENV) or "results")


def default_out_dir(scenario: Scenario, run_id: str) -> Path:
    return results_root() / f"{scenario.name or 'run'}-{run_id}"


def event_loop_policy() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def run_scenario(
    scenario: Scenario,
    out: Path | None = None,
    *,
    quiet: bool = False,
    transport: str = "auto",
    echo: bool = True,
    workers: int = 1,
    html: bool = True,
) -> RunOutcome:
    """Run a scenario end to end and write every report; never raises on a bad server."""
    run_id = new_run_id()
    out_dir = prepare_out_dir(out or default_out_dir(scenario, run_id))
    api_key = api_key_from_env(scenario)
    embedded: EmbeddedTarget | None = None
    if scenario.target.sim is not None and not scenario.target.base_urls:
        embedded = start_embedded("sim", scenario.target.sim.model_dump())
        scenario = scenario.with_overrides(
            base_urls=[embedded.base_url],
            receipts_dir=scenario.target.receipts_dir or embedded.receipts_dir)
    if not scenario.target.base_urls:
        raise BadInputError("no target: give --base-url URL or set target.base_urls "
                            "(or [target.sim]) in the scenario")
    runner = Runner(scenario, out_dir, run_id, quiet=quiet, transport=transport,
                    api_key=api_key, workers=workers)
    write_json(out_dir / RUN_FILE, {"scenario": scenario.model_dump(mode="json"),
                                    "run": runner.state.to_dict()})
    event_loop_policy()
    try:
        state = asyncio.run(runner.run())
    except KeyboardInterrupt:  # a second Ctrl-C before the handlers were in place
        state = runner.state
        state.interrupted = state.interrupted or "interrupted by SIGINT"
    finally:
        if embedded is not None:
            embedded.stop()
    write_json(out_dir / SERVER_FILE, select_receipts(
        runner.server_document(), margin_s=scenario.telemetry.receipts_margin_s,
        since=scenario.telemetry.receipts_since, run_started=state.started))
    write_json(out_dir / RUN_FILE, {"scenario": scenario.model_dump(mode="json"),
                                    "run": state.to_dict()})
    summary = write_reports(out_dir, html=html)
    code = int(summary["gate"]["exit_code"])
    if echo:
        print(one_line(summary, out_dir), file=sys.stdout, flush=True)
    return RunOutcome(out_dir, code, summary)


def one_line(summary: dict[str, Any], out_dir: Path) -> str:
    gate = summary["gate"]
    bound = gate.get("upper_bound_95")
    bound_text = f", rate < {bound * 100:.2f}% @95%" if bound is not None else ""
    reasons = "; ".join(gate.get("reasons") or [])
    return (f"{summary['scenario']} [{gate['role']}]: {EXIT_WORDS.get(gate['exit_code'], '?')} "
            f"(exit {gate['exit_code']}): {gate['failures']}/{gate['measured']} failed"
            f"{bound_text}{' — ' + reasons if reasons else ''}; results in {out_dir}")


__all__ = ["ExitCode", "RunOutcome", "run_scenario"]
