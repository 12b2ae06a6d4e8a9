"""A run judged: its scenario, facts, statistics, gate and server facts, in one object.

Everything a report says about a run comes from here, rebuilt from the results
directory alone, so `dsv4-qual report DIR` after a crash, a later report version
or a second reader all see the same verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadgen.exit_codes import BadInputError
from loadgen.judge.aggregate import PhaseStats, RunStats, aggregate
from loadgen.judge.gate import GateResult, evaluate
from loadgen.results import RECORDS_FILE, RunFacts, is_run_dir, load_run, load_server
from loadgen.scenario import Scenario
from loadgen.targets.facts import ServerFacts


@dataclass
class RunReport:
    out_dir: Path
    scenario: Scenario
    run: RunFacts
    server: ServerFacts
    stats: RunStats
    gate: GateResult

    @property
    def measurement(self) -> PhaseStats | None:
        return self.stats.phases.get("measurement")


def judge_run(out_dir: Path) -> RunReport:
    """Read a results directory and judge it (no file is written)."""
    if not is_run_dir(out_dir):
        raise BadInputError(f"{out_dir}: no run.json or {RECORDS_FILE}: not a dsv4-qual "
                            "results directory")
    scenario, run = load_run(out_dir)
    server = ServerFacts.from_document(load_server(out_dir))
    stats = aggregate(out_dir, [str(v) for v in scenario.gate.fail_on])
    gate = evaluate(scenario.gate, stats.phases.get("measurement"), run, server)
    return RunReport(out_dir, scenario, run, server, stats, gate)
