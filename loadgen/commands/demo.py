"""`dsv4-qual demo`: the main job on the embedded default, on any machine.

It is `qualify` with both sides on the embedded sim: the positive control (the packed
C128A layout, vLLM 0.27's bug) must reproduce stuck_in_reasoning; the candidate (the
capacity layout, the #51318 fix) must stay clean under the same load. The two are
printed side by side with their verdict counts and bounds: the verdicts each side's
gate counts apart from the others, because a control counts only what reproduces the
bug (its other verdicts, the quiet faces of the same mechanism, are shown, not counted).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from loadgen.commands.qualify import qualify, sim_sides
from loadgen.exit_codes import EXIT_WORDS, BadInputError
from loadgen.judge.gate.qualification import NOT_PROVEN
from loadgen.judge.gate.run_report import RunReport
from loadgen.scenario import SimTarget, load_scenario

ROWS = ("server (C128A, indexer)", "measured requests", "ok", "verdicts counted",
        "verdicts not counted", "gated failures", "failure rate (95%)", "gate",
        "difference test")


def _counts(verdicts: list[tuple[str, int]]) -> str:
    return ", ".join(f"{k} {v}" for k, v in verdicts) or "-"


def _column(report: RunReport | None, sim: SimTarget | None = None) -> list[str]:
    """One side's cells, in ROWS' order (`sim`: what the side's sim ran)."""
    if report is None:
        return ["-", "-", "-", "-", "-", "-", "-", "not run"]
    st = report.measurement
    gate = report.gate
    ub, lb = gate.upper_bound_95, gate.lower_bound_95
    if gate.role == "control":
        # No reproduction bounds nothing: "> 0.0%" would read as a finding.
        bound = (f"> {lb * 100:.1f}%" if gate.failures and lb is not None
                 else "did not reproduce" if gate.measured else "-")
    elif gate.failures > gate.allowed and lb is not None:  # failed: how often, at least
        bound = f"> {lb * 100:.2f}%"
    else:
        bound = f"< {ub * 100:.2f}%" if ub is not None else "-"
    verdicts = sorted(st.verdicts.items()) if st is not None else []
    counted = set(gate.fail_on)
    interrupted = st.interrupted if st is not None else 0
    built = f"{report.server.layout or '?'}"
    if sim is not None:
        built += f", {sim.indexer}" + (" (prefix cache)" if sim.prefix_caching else "")
    return [
        built,
        str(gate.measured) + (f" ({interrupted} interrupted)" if interrupted else ""),
        str(st.verdicts.get("ok", 0) if st is not None else 0),
        _counts([(k, v) for k, v in verdicts if k in counted]),
        _counts([(k, v) for k, v in verdicts if k not in counted and k != "ok"]),
        gate.no_rate or f"{gate.failures}/{gate.measured}",
        bound,
        EXIT_WORDS.get(gate.exit_code, str(gate.exit_code)),
    ]


def caption(control: RunReport, quiet: bool) -> str:
    """What the counts mean: several verdicts per reply, and what a control counts."""
    counted = ", ".join(control.gate.fail_on)
    return ("A reply may carry several verdicts"
            + ("." if quiet else " (the progress lines count each reply once, under its "
               "most severe).")
            + f" A control counts only what reproduces the bug ({counted}); its other "
            "verdicts are shown, not counted.")


def run_demo(scenario_ref: str, out: Path | None, quiet: bool = False) -> int:
    """Qualify the scenario's sim against itself and print both sides; the exit code.

    `quiet` prints the table and the one `demo: exit N` line, nothing else: no progress,
    no side's result line, no log line of the sims (the reports keep all of it)."""
    scenario = load_scenario(scenario_ref)
    if scenario.target.sim is None and scenario.qualify is None:
        raise BadInputError(f"{scenario.name}: the demo needs [qualify] or [target.sim]")
    sides = sim_sides(scenario)
    outcome = qualify(scenario, sides, out, quiet=quiet, command="demo", echo=not quiet)
    q = outcome.qualification
    table = Table(title=f"dsv4-qual demo: {scenario.name} on the embedded sim",
                  caption=caption(q.control, quiet), caption_justify="left")
    table.add_column("")
    table.add_column("control (bug left in)")
    table.add_column("candidate (the fix)")
    tested = q.difference
    difference = (tested.test, f"p = {tested.p_value:.3g}: "
                  + ("proven" if tested.proven else "NOT PROVEN")) if tested else ("-", "-")
    for name, a, b in zip(ROWS, [*_column(q.control, sides.control.sim), difference[0]],
                          [*_column(q.candidate, sides.candidate.sim), difference[1]],
                          strict=True):
        table.add_row(name, a, b)
    console = Console()
    console.print(table)
    verdict = {
        0: "the control reproduced the bug and the candidate stayed clean",
        1: "the candidate failed its gate",
        2: "the control did not reproduce the bug: this setup cannot see it"
        if q.candidate is None else "the difference between the sides is not proven"
        if q.verdict == NOT_PROVEN else "the candidate's run was invalid",
        130: "interrupted",
    }.get(q.exit_code, "?")
    # One line, whatever the terminal's width: scripts and CI logs grep it.
    console.print(f"demo: exit {q.exit_code}: {verdict}; reports in {q.out_dir}",
                  soft_wrap=True, highlight=False)
    return q.exit_code
