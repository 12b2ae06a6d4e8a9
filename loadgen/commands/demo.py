"""`dsv4-qual demo`: the main job on the embedded default, on any machine.

It is `qualify` with both sides on the embedded sim: the positive control (the packed
C128A layout, vLLM 0.27's bug) must reproduce stuck_in_reasoning; the candidate (the
capacity layout, the #51318 fix) must stay clean under the same load. The two are
printed side by side with their verdict counts and bounds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from loadgen.commands.qualify import CANDIDATE_DIR, CONTROL_DIR, qualify
from loadgen.exit_codes import EXIT_WORDS, BadInputError
from loadgen.scenario import QualifyConfig, QualifySide, Scenario, load_scenario

CONTROL_LAYOUT = "packed"
CANDIDATE_LAYOUT = "capacity"


def sim_sides(scenario: Scenario) -> QualifyConfig:
    """The scenario's own [qualify] if it has one, else its sim in both layouts."""
    if scenario.qualify is not None:
        return scenario.qualify
    sim = scenario.target.sim
    if sim is None:
        raise BadInputError(f"{scenario.name}: the demo needs [qualify] or [target.sim]")
    return QualifyConfig(
        control=QualifySide(sim=sim.model_copy(update={"layout": CONTROL_LAYOUT})),
        candidate=QualifySide(sim=sim.model_copy(update={"layout": CANDIDATE_LAYOUT})))


def _column(summary: dict[str, Any] | None) -> list[str]:
    if summary is None:
        return ["-", "-", "not run", "-", "-", "not run"]
    m = summary["phases"].get("measurement", {})
    gate = summary["gate"]
    ub, lb = gate.get("upper_bound_95"), gate.get("lower_bound_95")
    if gate["role"] == "control":
        bound = f"> {lb * 100:.1f}%" if lb is not None else "-"
    else:
        bound = f"< {ub * 100:.2f}%" if ub is not None else "-"
    return [
        summary["target"].get("c128a_layout") or "?",
        str(m.get("requests", 0)),
        ", ".join(f"{k} {v}" for k, v in sorted(m.get("verdicts", {}).items())) or "-",
        f"{gate['failures']}/{gate['measured']}",
        bound,
        EXIT_WORDS.get(gate["exit_code"], str(gate["exit_code"])),
    ]


def _summary(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def run_demo(scenario_ref: str, out: Path, quiet: bool = False) -> int:
    scenario = load_scenario(scenario_ref)
    outcome = qualify(scenario, sim_sides(scenario), out, quiet=quiet)
    control = _summary(outcome.out_dir / CONTROL_DIR / "summary.json")
    candidate = _summary(outcome.out_dir / CANDIDATE_DIR / "summary.json")
    table = Table(title=f"dsv4-qual demo: {scenario.name} on the embedded sim")
    table.add_column("")
    table.add_column("control (bug left in)")
    table.add_column("candidate (the fix)")
    rows = ["C128A layout", "measured requests", "verdicts", "gated failures",
            "failure rate (95%)", "gate"]
    for name, a, b in zip(rows, _column(control), _column(candidate), strict=True):
        table.add_row(name, a, b)
    console = Console()
    console.print(table)
    verdict = {
        0: "the control reproduced the bug and the candidate stayed clean",
        1: "the candidate failed its gate",
        2: "the control did not reproduce the bug: this setup cannot see it"
        if candidate is None else "the candidate's run was invalid",
        130: "interrupted",
    }.get(outcome.exit_code, "?")
    console.print(f"demo: exit {outcome.exit_code}: {verdict}; reports in {outcome.out_dir}")
    return outcome.exit_code
