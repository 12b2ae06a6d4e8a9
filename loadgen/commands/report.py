"""`dsv4-qual report DIR`: judge a results directory again and rewrite its reports.

Every run ends here too, so a report rebuilt later reads exactly as the one the run
wrote, and a run killed before its reports can be finished by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.exit_codes import EXIT_WORDS, BadInputError
from loadgen.files import read_json
from loadgen.judge.qualification import COMMANDS, decide
from loadgen.judge.run_level import RUN_LEVEL_FILE, write_run_level
from loadgen.judge.run_report import RunReport, judge_run
from loadgen.report import QUALIFY_FILE, write_qualify_reports, write_run_reports
from loadgen.report.run_text import load_text
from loadgen.results import RUN_FILE, is_run_dir


@dataclass
class RunOutcome:
    """A finished run: its judgement and the summary.json written from it."""

    report: RunReport
    summary: dict[str, Any]
    #: A SIGINT/SIGTERM held while the finished run wrote its reports: they are
    #: complete, and the command stops after this run.
    interrupted_after: str | None = None

    @property
    def out_dir(self) -> Path:
        return self.report.out_dir

    @property
    def exit_code(self) -> int:
        return self.report.gate.exit_code


def rebuild_reports(out_dir: Path, html: bool = True) -> RunOutcome:
    """Judge the run and write every report, run_level.jsonl first (records.jsonl is
    never rewritten: what the run-level rules derive is stored beside it)."""
    report = judge_run(out_dir)
    write_run_level(out_dir / RUN_LEVEL_FILE, report.stats.changed)
    return RunOutcome(report, write_run_reports(report, html=html))


CONTROL_DIR = "control"
CANDIDATE_DIR = "candidate"


def rebuild_any(out_dir: Path) -> tuple[int, str]:
    """Rebuild a run's reports, or a qualification's (qualify, demo): both sides and the
    side-by-side pages. (exit code as the command had it, the line to print)."""
    if is_run_dir(out_dir):
        outcome = rebuild_reports(out_dir)
        return outcome.exit_code, one_line(outcome.report)
    if is_run_dir(out_dir / CONTROL_DIR):
        control = rebuild_reports(out_dir / CONTROL_DIR).report
        candidate = (rebuild_reports(out_dir / CANDIDATE_DIR).report
                     if is_run_dir(out_dir / CANDIDATE_DIR) else None)
        # What the command that made it decided stays decided: its name, whether the
        # scenario let the sides serve different models.
        before = read_json(out_dir / QUALIFY_FILE)
        said = before.get("command")
        command = said if isinstance(said, str) and said in COMMANDS else "qualify"
        qualification = decide(out_dir, control.scenario.name, control, candidate,
                               allow_different_models=bool((before.get("model") or {})
                                                           .get("allowed")),
                               command=command)
        doc = write_qualify_reports(qualification)
        return qualification.exit_code, f"{command} {doc.scenario}: {doc.headline}; " \
            f"reports in {out_dir}"
    raise BadInputError(f"{out_dir}: not a dsv4-qual results directory (no {RUN_FILE}, "
                        f"and no {CONTROL_DIR}/{RUN_FILE} of a qualify or demo run)")


def one_line(report: RunReport) -> str:
    """The line a CI log shows for a run."""
    gate = report.gate
    if gate.no_rate:  # nothing to count or bound: say what happened
        counted = gate.no_rate
    elif gate.role == "control":  # what a control shows is how surely it reproduced
        lower = gate.lower_bound_95
        counted = f"{gate.failures}/{gate.measured} reproduced the bug" + (
            f", rate > {lower * 100:.2f}% @95%" if gate.failures and lower is not None
            else ": did not reproduce" if gate.measured else "")
    else:
        upper = gate.upper_bound_95
        counted = f"{gate.failures}/{gate.measured} failed" + (
            f", rate < {upper * 100:.2f}% @95%" if upper is not None else "")
    reasons = "; ".join(gate.reasons)
    return (f"{report.scenario.name} [{gate.role}]: {EXIT_WORDS.get(gate.exit_code, '?')} "
            f"(exit {gate.exit_code}): {counted}{' — ' + reasons if reasons else ''}; "
            f"load: {load_text(report)}; results in {report.out_dir}")
