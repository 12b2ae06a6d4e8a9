"""A finished run judged from its results directory alone, its reports written.

Every run ends here (run, each round of a soak, each side of a qualification), and so
does `dsv4-qual report DIR`: a report rebuilt later reads exactly as the one the run
wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.exit_codes import EXIT_WORDS
from loadgen.files import write_atomic
from loadgen.judge.gate.run_report import RunReport, judge_run
from loadgen.report.junit import render_junit
from loadgen.report.markdown import render_markdown
from loadgen.report.run_text import load_text
from loadgen.report.summary import summary_document
from loadgen.results import HTML_FILE, JUNIT_FILE, MARKDOWN_FILE
from loadgen.results.run_level import RUN_LEVEL_FILE, write_run_level
from loadgen.results.summary import SummaryFile, write_summary
from loadgen.scenario import Role


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


def write_run_reports(report: RunReport, html: bool = True) -> dict[str, Any]:
    """summary.json, report.md, junit.xml (and report.html) of a judged run; the summary.

    Each file is written whole or not at all, so a run stopped mid-write never leaves a
    half report that a CI job would read as the result."""
    out = report.out_dir
    summary = SummaryFile.model_validate(summary_document(report))
    write_summary(out, summary)
    write_atomic(out / MARKDOWN_FILE, render_markdown(report).encode())
    write_atomic(out / JUNIT_FILE, render_junit(report))
    if html:
        from loadgen.report.html import render_html  # matplotlib: only when asked

        write_atomic(out / HTML_FILE, render_html(report).encode())
    return summary.document()


def one_line(report: RunReport) -> str:
    """The line a CI log shows for a run."""
    gate = report.gate
    if gate.no_rate:  # nothing to count or bound: say what happened
        counted = gate.no_rate
    elif gate.role == Role.CONTROL:  # what a control shows is how surely it reproduced
        lower = gate.lower_bound_95
        counted = f"{gate.failures}/{gate.measured} reproduced the bug" + (
            f", rate > {lower * 100:.2f}% @95%" if gate.failures and lower is not None
            else ": did not reproduce" if gate.measured else "")
    elif gate.failures > gate.allowed and gate.lower_bound_95 is not None:
        # More failed than allowed: what the run proves is how often, at least, it fails
        # (an upper bound here would read like good news).
        counted = (f"{gate.failures}/{gate.measured} failed, rate > "
                   f"{gate.lower_bound_95 * 100:.2f}% @95%")
    else:
        upper = gate.upper_bound_95
        counted = f"{gate.failures}/{gate.measured} failed" + (
            f", rate < {upper * 100:.2f}% @95%" if upper is not None else "")
    reasons = "; ".join(gate.reasons)
    unchecked = "".join(f"; NOT CHECKED: {item}" for item in gate.not_checked)
    return (f"{report.scenario.name} [{gate.role}]: {EXIT_WORDS.get(gate.exit_code, '?')} "
            f"(exit {gate.exit_code}): {counted}{' — ' + reasons if reasons else ''}"
            f"{unchecked}; "
            f"load: {load_text(report)}; results in {report.out_dir}")


def result_document(report: RunReport) -> dict[str, Any]:
    """What `run --json` prints: the result line's facts, for a program to read (the
    whole account is summary.json, beside them)."""
    gate = report.gate
    return {
        "scenario": report.scenario.name, "run_id": report.run.run_id,
        "role": str(gate.role), "exit_code": gate.exit_code,
        "result": EXIT_WORDS.get(gate.exit_code, "?"), "passed": gate.passed,
        "failures": gate.failures, "measured": gate.measured, "allowed": gate.allowed,
        "upper_bound_95": gate.upper_bound_95, "lower_bound_95": gate.lower_bound_95,
        "checked_answers": gate.answers.checked if gate.answers is not None else None,
        "reasons": list(gate.reasons), "not_checked": list(gate.not_checked),
        "statement": gate.statement, "results": str(report.out_dir),
    }
