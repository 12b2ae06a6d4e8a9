"""`dsv4-qual demo`: the main job on the embedded default, on any machine.

It is `qualify` with both sides on the embedded sim: the positive control (the packed
C128A layout, vLLM 0.27's bug) must reproduce stuck_in_reasoning; the candidate (the
capacity layout, the #51318 fix) must stay clean under the same load. The two are
printed side by side with their verdict counts and bounds.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from loadgen.commands.qualify import qualify
from loadgen.exit_codes import EXIT_WORDS, BadInputError
from loadgen.judge.run_report import RunReport
from loadgen.results import default_out_dir, new_run_id
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


def _column(report: RunReport | None) -> list[str]:
    if report is None:
        return ["-", "-", "not run", "-", "-", "not run"]
    st = report.measurement
    gate = report.gate
    ub, lb = gate.upper_bound_95, gate.lower_bound_95
    if gate.role == "control":
        bound = f"> {lb * 100:.1f}%" if lb is not None else "-"
    else:
        bound = f"< {ub * 100:.2f}%" if ub is not None else "-"
    verdicts = sorted(st.verdicts.items()) if st is not None else []
    interrupted = st.interrupted if st is not None else 0
    return [
        report.server.layout or "?",
        str(gate.measured) + (f" ({interrupted} interrupted)" if interrupted else ""),
        ", ".join(f"{k} {v}" for k, v in verdicts) or "-",
        gate.no_rate or f"{gate.failures}/{gate.measured}",
        bound,
        EXIT_WORDS.get(gate.exit_code, str(gate.exit_code)),
    ]


def run_demo(scenario_ref: str, out: Path | None, quiet: bool = False) -> int:
    scenario = load_scenario(scenario_ref)
    outcome = qualify(scenario, sim_sides(scenario),
                      out or default_out_dir("demo", "", new_run_id()), quiet=quiet)
    q = outcome.qualification
    table = Table(title=f"dsv4-qual demo: {scenario.name} on the embedded sim")
    table.add_column("")
    table.add_column("control (bug left in)")
    table.add_column("candidate (the fix)")
    rows = ["C128A layout", "measured requests", "verdicts", "gated failures",
            "failure rate (95%)", "gate"]
    for name, a, b in zip(rows, _column(q.control), _column(q.candidate), strict=True):
        table.add_row(name, a, b)
    console = Console()
    console.print(table)
    verdict = {
        0: "the control reproduced the bug and the candidate stayed clean",
        1: "the candidate failed its gate",
        2: "the control did not reproduce the bug: this setup cannot see it"
        if q.candidate is None else "the candidate's run was invalid",
        130: "interrupted",
    }.get(q.exit_code, "?")
    console.print(f"demo: exit {q.exit_code}: {verdict}; reports in {q.out_dir}")
    return q.exit_code
