"""The qualification's report.md: the headline and both sides in one table."""

from __future__ import annotations

from loadgen.report.qualify_doc import QualifyDocument, comparison_rows, verdict_rows


def render_qualify_markdown(doc: QualifyDocument) -> str:
    lines = [f"# dsv4-qual {doc.command}: {doc.scenario}", "", f"**{doc.headline}**", ""]
    lines += [f"- {r}" for r in doc.reasons]
    lines += [f"- {r}" for r in doc.statements]
    if doc.difference_line:
        lines.append(f"- {doc.difference_line}")
    lines += ["", "| | control | candidate |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in comparison_rows(doc)]
    lines += ["", "| verdict (measured) | control | candidate |", "|---|---:|---:|"]
    lines += [f"| {n} | {a} | {'-' if b is None else b} |" for n, a, b in verdict_rows(doc)]
    tail = (", `candidate/report.md`." if doc.candidate
            else " (the candidate was not run).")
    lines += ["", "Each side's full report: `control/report.md`" + tail]
    return "\n".join(lines) + "\n"
