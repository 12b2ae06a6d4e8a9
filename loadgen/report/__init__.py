"""Rendering only: a judged run (or qualification) -> the files people and CI read.

One module per output: summary.json (`summary`), report.md (`markdown`), junit.xml
(`junit`), report.html (`html`, with `figures` and `telemetry_plots`), the soak
trend (`trend`) and the qualification's side-by-side pages (`qualify_*`).
"""

from __future__ import annotations

from typing import Any

from loadgen.files import rounded, write_atomic, write_json
from loadgen.judge.qualification import Qualification
from loadgen.judge.run_report import RunReport
from loadgen.report.junit import render_junit
from loadgen.report.markdown import render_markdown
from loadgen.report.qualify_doc import QualifyDocument, qualify_document
from loadgen.report.qualify_junit import render_qualify_junit
from loadgen.report.qualify_markdown import render_qualify_markdown
from loadgen.report.summary import summary_document
from loadgen.results import HTML_FILE, JUNIT_FILE, MARKDOWN_FILE, SUMMARY_FILE


def write_run_reports(report: RunReport, html: bool = True) -> dict[str, Any]:
    """summary.json, report.md, junit.xml (and report.html) of a judged run; the summary."""
    out = report.out_dir
    summary = rounded(summary_document(report))
    write_json(out / SUMMARY_FILE, summary)
    write_atomic(out / MARKDOWN_FILE, render_markdown(report).encode())
    write_atomic(out / JUNIT_FILE, render_junit(report))
    if html:
        from loadgen.report.html import render_html  # matplotlib: only when asked

        write_atomic(out / HTML_FILE, render_html(report).encode())
    return summary


QUALIFY_FILE = "qualify.json"


def write_qualify_reports(q: Qualification) -> QualifyDocument:
    """qualify.json, report.md, junit.xml and report.html of a qualification; the document."""
    doc = qualify_document(q)
    out = q.out_dir
    write_json(out / QUALIFY_FILE, rounded(doc.to_dict()))
    write_atomic(out / MARKDOWN_FILE, render_qualify_markdown(doc).encode())
    write_atomic(out / JUNIT_FILE, render_qualify_junit(q, doc))
    from loadgen.report.qualify_html import render_qualify_html  # matplotlib: only here

    write_atomic(out / HTML_FILE, render_qualify_html(q, doc).encode())
    return doc


__all__ = ["QUALIFY_FILE", "write_qualify_reports", "write_run_reports"]
