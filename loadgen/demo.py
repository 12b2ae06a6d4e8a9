"""`dsv4-qual demo`: the main job on the embedded default, on any machine.

The positive control (the sim with the packed C128A layout, vLLM 0.27's bug) must
reproduce stuck_in_reasoning; the candidate (the capacity layout, the #51318 fix) must
stay clean under the same load. Both runs write their own results directory; the two
are printed side by side with their verdict counts and bounds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .exit_codes import ExitCode
from .orchestrate import run_scenario
from .scenario import Scenario, load_scenario

CONTROL_LAYOUT = "packed"
CANDIDATE_LAYOUT = "capacity"


def _with_sim(scenario: Scenario, layout: str, role: str) -> Scenario:
    sim = scenario.target.sim
    if sim is None:
        from .exit_codes import BadInputError

        raise BadInputError(f"{scenario.name}: the demo needs a [target.sim] section")
    target = scenario.target.model_copy(update={"sim": sim.model_copy(update={"layout": layout}),
                                                "base_urls": []})
    gate = scenario.gate.model_copy(update={"role": role})
    return scenario.model_copy(update={"target": target, "gate": gate,
                                       "name": f"{scenario.name}-{role}"})


def demo_exit_code(control: dict[str, Any], candidate: dict[str, Any]) -> int:
    """0 only when the control reproduced and the candidate stayed clean."""
    control_code = control["gate"]["exit_code"]
    candidate_code = candidate["gate"]["exit_code"]
    if ExitCode.INTERRUPTED in (control_code, candidate_code):
        return int(ExitCode.INTERRUPTED)
    if control_code != ExitCode.PASSED:
        return int(ExitCode.RUN_INVALID)  # the harness could not see the bug here
    return int(candidate_code)


def _column(summary: dict[str, Any]) -> list[str]:
    m = summary["phases"].get("measurement", {})
    verdicts = m.get("verdicts", {})
    gate = summary["gate"]
    ub, lb = gate.get("upper_bound_95"), gate.get("lower_bound_95")
    return [
        summary["target"].get("c128a_layout") or "?",
        str(m.get("requests", 0)),
        ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())) or "-",
        f"{gate['failures']}/{gate['measured']}",
        f"> {lb * 100:.1f}%" if gate["role"] == "control" and lb is not None else
        (f"< {ub * 100:.2f}%" if ub is not None else "-"),
        {0: "PASSED", 1: "GATE FAILED", 2: "RUN INVALID", 130: "INTERRUPTED"}.get(
            gate["exit_code"], str(gate["exit_code"])),
    ]


def run_demo(scenario_ref: str, out: Path, quiet: bool = False) -> int:
    base = load_scenario(scenario_ref)
    results = {}
    for role, layout in (("control", CONTROL_LAYOUT), ("candidate", CANDIDATE_LAYOUT)):
        sc = _with_sim(base, layout, role)
        outcome = run_scenario(sc, out / role, quiet=quiet, echo=not quiet)
        results[role] = outcome.summary
    console = Console()
    table = Table(title=f"dsv4-qual demo: {base.name} on the embedded sim")
    table.add_column("")
    table.add_column("control (bug left in)")
    table.add_column("candidate (the fix)")
    rows = ["C128A layout", "measured requests", "verdicts", "gated failures",
            "failure rate (95%)", "gate"]
    for name, a, b in zip(rows, _column(results["control"]), _column(results["candidate"]),
                          strict=True):
        table.add_row(name, a, b)
    console.print(table)
    code = demo_exit_code(results["control"], results["candidate"])
    verdict = {
        0: "the control reproduced the bug and the candidate stayed clean",
        1: "the candidate failed its gate",
        2: "the control did not reproduce the bug: this setup cannot see it",
        130: "interrupted",
    }[code]
    console.print(f"demo: exit {code}: {verdict}; results in {out}/control and "
                  f"{out}/candidate")
    return code
