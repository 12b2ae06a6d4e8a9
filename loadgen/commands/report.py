"""`dsv4-qual report DIR`: judge a results directory again and rewrite its reports.

A run, or a qualification's two sides and its side-by-side pages; a run killed before
its reports were written can be finished by hand (`report.outcome` does the judging).
"""

from __future__ import annotations

from pathlib import Path

from loadgen.exit_codes import BadInputError
from loadgen.files import read_json
from loadgen.judge.qualification import COMMANDS, decide
from loadgen.report import QUALIFY_FILE, write_qualify_reports
from loadgen.report.outcome import one_line, rebuild_reports
from loadgen.results import CANDIDATE_DIR, CONTROL_DIR, RUN_FILE, is_run_dir


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


