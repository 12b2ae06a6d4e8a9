"""A judged qualification's files: qualify.json, report.md, junit.xml and report.html."""

from __future__ import annotations

from loadgen.files import write_atomic
from loadgen.judge.gate.qualification import Qualification
from loadgen.report.qualify_doc import QualifyDocument, qualify_document
from loadgen.report.qualify_junit import render_qualify_junit
from loadgen.report.qualify_markdown import render_qualify_markdown
from loadgen.results import HTML_FILE, JUNIT_FILE, MARKDOWN_FILE
from loadgen.results.qualification import write_qualification


def write_qualify_reports(q: Qualification) -> QualifyDocument:
    """Every file of a qualification from one document, so the pages cannot disagree."""
    doc = qualify_document(q)
    out = q.out_dir
    write_qualification(out, doc.to_file())
    write_atomic(out / MARKDOWN_FILE, render_qualify_markdown(doc).encode())
    write_atomic(out / JUNIT_FILE, render_qualify_junit(q, doc))
    from loadgen.report.qualify_html import render_qualify_html  # matplotlib: only here

    write_atomic(out / HTML_FILE, render_qualify_html(q, doc).encode())
    return doc
