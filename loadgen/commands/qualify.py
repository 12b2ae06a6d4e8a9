"""`dsv4-qual qualify`: the positive control first, then the candidate; one verdict.

A clean candidate means something only if the same harness, load and scenario make
a server with the bug fail. So the control runs first, with a control gate (it
passes only by reproducing #52448's signature). If it does not reproduce, the
qualification is invalid (exit 2) and the candidate is NOT run: a clean candidate
would prove nothing, and a release engineer must not read a green candidate next
to a red control as a pass. Otherwise the candidate runs with the scenario's own
gate, and its exit code is the qualification's, provided both sides served the same
model (`judge.gate.qualification`: else invalid, unless `qualify.allow_different_models`).

Each side is an ordinary run (`run_scenario`) with its own results directory under
the qualification's; the side-by-side reports are written next to them.

The targets: the command line's URLs, else the scenario's `[qualify.control]` and
`[qualify.candidate]`; a side that names none, in a scenario with `[target.sim]`, runs
that sim with the bug left in (control: packed) or fixed (candidate: capacity), which
is all `demo` is (`sim_sides`). One URL without the other is an error: half of a
qualification against a server and half against the sim would compare two setups.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.commands import interrupts
from loadgen.commands.run import run_scenario
from loadgen.exit_codes import BadInputError, ExitCode
from loadgen.judge.gate.qualification import Qualification, decide
from loadgen.judge.gate.run_report import RunReport
from loadgen.observe.metrics import LiveMetrics
from loadgen.report import write_qualify_reports
from loadgen.report.qualify_doc import QualifyDocument
from loadgen.results import (
    CANDIDATE_DIR,
    CONTROL_DIR,
    claimed,
    default_out_dir,
    new_run_id,
)
from loadgen.scenario import QualifyConfig, QualifySide, Role, Scenario


@dataclass
class QualifyOutcome:
    qualification: Qualification
    document: QualifyDocument  # what qualify.json says

    @property
    def out_dir(self) -> Path:
        return self.qualification.out_dir

    @property
    def exit_code(self) -> int:
        return self.qualification.exit_code


def _has_target(side: QualifySide) -> bool:
    return bool(side.base_urls) or side.sim is not None


def sim_sides(scenario: Scenario) -> QualifyConfig:
    """The scenario's [qualify], each side without a target given the scenario's sim as
    that side plays it (`SimTarget.playing`: the bug left in for the control, the fix for
    the candidate). What `demo` runs, and `qualify` when no URL is given."""
    cfg = scenario.qualify or QualifyConfig()
    sim = scenario.target.sim
    if sim is None or scenario.target.base_urls:
        return cfg

    def fill(side: QualifySide, role: Role) -> QualifySide:
        if _has_target(side):
            return side
        return side.model_copy(update={"sim": sim.playing(role)})

    return cfg.model_copy(update={"control": fill(cfg.control, Role.CONTROL),
                                  "candidate": fill(cfg.candidate, Role.CANDIDATE)})


def with_sides(scenario: Scenario, *, control_urls: list[str], candidate_urls: list[str],
               control_receipts: str | None, candidate_receipts: str | None) -> QualifyConfig:
    """The scenario's [qualify] with the command line's targets applied over it; with no
    URL at all, a side the scenario gives no target runs its [target.sim] (`sim_sides`)."""
    cfg = scenario.qualify or QualifyConfig()
    for given, missing, urls, other in (("control", "candidate", control_urls, cfg.candidate),
                                        ("candidate", "control", candidate_urls, cfg.control)):
        if urls and not (control_urls and candidate_urls) and not _has_target(other):
            raise BadInputError(
                f"qualify needs a {missing} target: --{given} was given without "
                f"--{missing} (and the scenario's [qualify.{missing}] names none); give "
                f"both URLs, or neither to run the scenario's sim on both sides")
    if not control_urls and not candidate_urls:
        cfg = sim_sides(scenario)

    def side(base: QualifySide, urls: list[str], receipts: str | None) -> QualifySide:
        update: dict[str, Any] = {}
        if urls:  # a URL on the command line replaces the scenario's target, sim included
            update.update(base_urls=urls, sim=None)
        if receipts:
            update["receipts_dir"] = receipts
        data = base.model_dump(mode="python") | update
        try:
            return QualifySide.model_validate(data)
        except ValueError as exc:
            raise BadInputError(f"command line: {exc}".splitlines()[0]) from None

    control = side(cfg.control, control_urls, control_receipts)
    candidate = side(cfg.candidate, candidate_urls, candidate_receipts)
    shared = sorted(set(control.base_urls) & set(candidate.base_urls))
    if shared:
        raise BadInputError(f"qualify: {shared[0]} is given as both the control and the "
                            "candidate: a qualification compares two servers (the bug left "
                            "in, and the fix)")
    return cfg.model_copy(update={"control": control, "candidate": candidate})


def side_scenario(scenario: Scenario, cfg: QualifyConfig, role: Role) -> Scenario:
    """The scenario one side runs: its target, and the gate of its role."""
    side = cfg.control if role == Role.CONTROL else cfg.candidate
    data = scenario.model_dump(mode="python")
    data["qualify"] = None
    data["soak"] = None
    data["target"].update(base_urls=list(side.base_urls),
                          receipts_dir=side.receipts_dir or data["target"]["receipts_dir"],
                          sim=side.sim.model_dump() if side.sim else None)
    gate = data["gate"]
    gate["role"] = str(role)
    if role == Role.CONTROL:
        gate["fail_on"] = list(cfg.control_fail_on)
        gate["allowed"] = cfg.control_allowed
        gate["require_receipts"] = bool(side.require_receipts)
    elif side.require_receipts is not None:
        gate["require_receipts"] = side.require_receipts
    return scenario.revalidated(data)


def qualify(scenario: Scenario, cfg: QualifyConfig, out: Path | None, *, quiet: bool = False,
            transport: str = "auto", command: str = "qualify",
            echo: bool = True, observer: LiveMetrics | None = None) -> QualifyOutcome:
    """Control, then (only if it reproduced) candidate; side-by-side reports; the verdict.

    `command` names what the user ran (`qualify`, `demo`): the default results
    directory and every side-by-side page carry it. `echo`: each side's result line
    (a quiet demo prints only its table). `observer`: the metrics of `--metrics-port`,
    told of each side's run in turn (round 1 the control, round 2 the candidate)."""
    for name, side in (("control", cfg.control), ("candidate", cfg.candidate)):
        if not side.base_urls and side.sim is None:
            raise BadInputError(
                f"qualify needs a {name} target: --{name} URL, qualify.{name}.base_urls or "
                f"[qualify.{name}.sim] in the scenario, or (with no URL) its [target.sim]")
    control_sc = side_scenario(scenario, cfg, Role.CONTROL)
    candidate_sc = side_scenario(scenario, cfg, Role.CANDIDATE)
    where = out or default_out_dir(command, "" if command == "demo" else scenario.name,
                                   new_run_id())
    with claimed(where, command) as out_dir:
        return _qualify_in(scenario, cfg, out_dir, control_sc, candidate_sc, quiet=quiet,
                           transport=transport, command=command, echo=echo,
                           observer=observer)


def _qualify_in(scenario: Scenario, cfg: QualifyConfig, out_dir: Path, control_sc: Scenario,
                candidate_sc: Scenario, *, quiet: bool, transport: str, command: str,
                echo: bool, observer: LiveMetrics | None) -> QualifyOutcome:
    """Both sides in the qualification's directory, held for it (`claimed`)."""
    interrupts.resume()
    control = run_scenario(control_sc, out_dir / CONTROL_DIR, quiet=quiet,
                           transport=transport, echo=echo, observer=observer,
                           side=str(Role.CONTROL)).report
    candidate: RunReport | None = None
    if control.gate.exit_code == ExitCode.PASSED:
        try:
            interrupts.resume()  # raises at once for a signal held since the control ended
            candidate = run_scenario(candidate_sc, out_dir / CANDIDATE_DIR, quiet=quiet,
                                     transport=transport, echo=echo,
                                     observer=observer, side=str(Role.CANDIDATE)).report
        except KeyboardInterrupt:  # between the two runs: report what the control showed
            candidate = None
    interrupts.hold()  # the side-by-side reports are written whole, whatever comes
    qualification = decide(out_dir, scenario.name, control, candidate,
                           allow_different_models=cfg.allow_different_models,
                           command=command)
    return QualifyOutcome(qualification, write_qualify_reports(qualification))
