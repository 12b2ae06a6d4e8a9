"""A qualification's verdict from its two runs: did the control reproduce, did the candidate hold.

A clean candidate means something only if the same harness, load and scenario made
a server with the bug fail. A control that did not reproduce makes the whole
qualification invalid (exit 2), whatever the candidate did: the candidate is then
not even run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadgen.exit_codes import ExitCode
from loadgen.judge.run_report import RunReport

NOT_REPRODUCED = ("the positive control did not reproduce the bug ({detail}): the harness "
                  "cannot see the bug in this setup, so a clean candidate would prove "
                  "nothing; the candidate was not run")
VERDICT_WORDS = {0: "QUALIFIED", 1: "NOT QUALIFIED", 2: "INVALID", 130: "INTERRUPTED"}


@dataclass
class Qualification:
    out_dir: Path
    scenario: str
    exit_code: int
    verdict: str  # one of VERDICT_WORDS' values
    reasons: list[str]
    control: RunReport
    candidate: RunReport | None

    @property
    def passed(self) -> bool:
        return self.exit_code == ExitCode.PASSED


def decide(out_dir: Path, scenario: str, control: RunReport,
           candidate: RunReport | None) -> Qualification:
    def verdict(code: int, reasons: list[str]) -> Qualification:
        return Qualification(out_dir, scenario, code, VERDICT_WORDS.get(code, "INVALID"),
                             reasons, control, candidate)

    gate = control.gate
    if gate.exit_code == ExitCode.INTERRUPTED:
        return verdict(gate.exit_code, ["the control run was interrupted"])
    if gate.exit_code == ExitCode.RUN_INVALID:
        return verdict(gate.exit_code, ["the control run is invalid: " + "; ".join(gate.reasons)])
    if gate.exit_code == ExitCode.GATE_FAILED:
        detail = (f"{gate.failures} of {gate.measured} measured requests with "
                  f"{', '.join(gate.fail_on)}; it needs more than {gate.allowed}")
        return verdict(int(ExitCode.RUN_INVALID), [NOT_REPRODUCED.format(detail=detail)])
    if candidate is None:  # the control reproduced, then a stop came before the candidate
        return verdict(int(ExitCode.INTERRUPTED), ["interrupted before the candidate ran"])
    cgate = candidate.gate
    return verdict(cgate.exit_code, [f"candidate: {r}" for r in cgate.reasons])

