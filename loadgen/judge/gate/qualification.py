"""A qualification's verdict from its two runs: did the control reproduce, did the candidate hold.

A clean candidate means something only if the same harness, load and scenario made
a server with the bug fail. A control that did not reproduce makes the whole
qualification invalid (exit 2), whatever the candidate did: the candidate is then
not even run. A control that reproduced and a candidate within its gate qualify only
when the candidate's failure rate is shown below the control's (`judge.gate.difference`:
Fisher's exact test, one-sided, at 95%); else the qualification is NOT PROVEN (exit 2)
and says how many measured requests per side would settle it. And the control must
serve the candidate's model: a control of another
model (one that is stuck whatever its attention does) reproduces nothing about the
candidate's, so different models make the qualification invalid too, unless the
scenario says they may differ (`qualify.allow_different_models`). The vLLM release of
each side is stated, not compared: a qualification of a release usually sets the fix's
release against the bug's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.exit_codes import ExitCode
from loadgen.judge.gate.difference import Difference, difference
from loadgen.judge.gate.run_report import RunReport
from loadgen.targets.facts import ModelIdentity, model_identity

NOT_REPRODUCED = ("the positive control did not reproduce the bug ({detail}): the harness "
                  "cannot see the bug in this setup, so a clean candidate would prove "
                  "nothing; the candidate was not run")
OTHER_MODEL = ("the control and the candidate do not serve the same model ({detail}): a "
               "control of another model proves nothing about the candidate's; set "
               "qualify.allow_different_models = true to qualify them anyway")
#: How a qualification names each outcome of its exit code (a run's own: EXIT_WORDS).
VERDICT_WORDS: dict[int, str] = {
    ExitCode.PASSED: "QUALIFIED",
    ExitCode.GATE_FAILED: "NOT QUALIFIED",
    ExitCode.RUN_INVALID: "INVALID",
    ExitCode.INTERRUPTED: "INTERRUPTED",
}
#: A control that reproduced and a clean candidate the test cannot tell apart (exit 2).
NOT_PROVEN = "NOT PROVEN"
#: The commands that make a qualification: its pages are headed with the one that did.
COMMANDS = ("qualify", "demo")


def release_text(report: RunReport) -> str:
    """The vLLM release a side ran, and where we learnt it."""
    server = report.server
    if server.receipts.vllm_versions:
        return f"vLLM {', '.join(server.receipts.vllm_versions)} (patch receipts)"
    if server.versions:
        return f"{', '.join(server.versions)} (/version)"
    return "release unknown (no receipt, no /version)"


@dataclass
class ModelCheck:
    """Whether both sides served the same model, and what each said of it."""

    control: ModelIdentity
    candidate: ModelIdentity | None
    differences: list[str] = field(default_factory=list)
    allowed: bool = False  # the scenario lets them differ

    @property
    def same(self) -> bool:
        return not self.differences

    def statement(self) -> str:
        if self.candidate is None:
            return f"control model: {self.control.describe()}"
        if self.same and self.control.same_checkpoint_renamed(self.candidate):
            return (f"both sides served the same checkpoint under other names: control "
                    f"{self.control.describe()}, candidate {self.candidate.describe()}")
        if self.same:
            return f"both sides served {self.control.describe()}"
        return (f"the sides served different models ({'; '.join(self.differences)}), "
                "allowed by qualify.allow_different_models")

    def to_dict(self) -> dict[str, Any]:
        return {"same": self.same, "allowed": self.allowed, "differences": self.differences,
                "control": self.control.to_dict(),
                "candidate": self.candidate.to_dict() if self.candidate else None}


def check_models(control: RunReport, candidate: RunReport | None,
                 allow_different: bool) -> ModelCheck:
    mine = model_identity(control.run.model, control.server)
    if candidate is None:
        return ModelCheck(mine, None, allowed=allow_different)
    theirs = model_identity(candidate.run.model, candidate.server)
    return ModelCheck(mine, theirs, mine.differences(theirs), allow_different)


@dataclass
class Qualification:
    out_dir: Path
    scenario: str
    exit_code: int
    verdict: str  # one of VERDICT_WORDS' values
    reasons: list[str]
    control: RunReport
    candidate: RunReport | None
    models: ModelCheck | None = None
    statements: list[str] = field(default_factory=list)  # what each side served and ran
    #: Which command made it (`qualify`, or `demo`: both sides on the sim), so its pages
    #: and a later `report DIR` say the name the user ran.
    command: str = "qualify"
    #: The test between the sides' failure rates (None: a side measured no reply).
    difference: Difference | None = None

    @property
    def passed(self) -> bool:
        return self.exit_code == ExitCode.PASSED


def decide(out_dir: Path, scenario: str, control: RunReport,
           candidate: RunReport | None, *, allow_different_models: bool = False,
           command: str = "qualify") -> Qualification:
    models = check_models(control, candidate, allow_different_models)
    statements = [models.statement(), f"control: {release_text(control)}"]
    if candidate is not None:
        statements.append(f"candidate: {release_text(candidate)}")

    gate = control.gate
    tested = None
    if candidate is not None and not gate.no_rate and not candidate.gate.no_rate:
        tested = difference(gate.failures, gate.measured, candidate.gate.failures,
                            candidate.gate.measured)

    def verdict(code: int, reasons: list[str], word: str | None = None) -> Qualification:
        return Qualification(out_dir, scenario, code, word or VERDICT_WORDS.get(code, "INVALID"),
                             reasons, control, candidate, models, statements, command,
                             tested)

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
    reasons = [f"candidate: {r}" for r in cgate.reasons]
    if cgate.exit_code == ExitCode.INTERRUPTED:
        return verdict(cgate.exit_code, reasons)
    if not models.same and not models.allowed:
        detail = "; ".join(models.differences)
        return verdict(int(ExitCode.RUN_INVALID), [OTHER_MODEL.format(detail=detail), *reasons])
    if cgate.exit_code == ExitCode.PASSED and (tested is None or not tested.proven):
        why = tested.sentence() if tested is not None else "a side has no failure rate"
        return verdict(int(ExitCode.RUN_INVALID), [why], NOT_PROVEN)
    return verdict(cgate.exit_code, reasons)
