"""report.md: what a person pastes into a bug report or a release ticket."""

from __future__ import annotations

from loadgen.bounds import describe_bound
from loadgen.exit_codes import EXIT_WORDS
from loadgen.judge.findings import findings_lines
from loadgen.judge.gate.run_report import RunReport
from loadgen.report.facts_text import server_words
from loadgen.report.run_text import (
    answers_lines,
    client_saturation,
    load_text,
    reference_lines,
    run_level_text,
    session_lines,
)
from loadgen.scenario import Role
from loadgen.targets.readiness import BOTH_PROBES


def _fmt(value: float | None, scale: float = 1.0, digits: int = 3) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


def _fence(text: str) -> str:
    return "```text\n" + text.replace("```", "'''") + "\n```"


def render_markdown(report: RunReport) -> str:
    gate, server, run = report.gate, report.server, report.run
    words = server_words(server)
    lines = [
        f"# dsv4-qual: {report.scenario.name} ({gate.role})",
        "",
        f"**{EXIT_WORDS.get(gate.exit_code, gate.exit_code)}** (exit {gate.exit_code})"
        + (f" — {gate.no_rate}." if gate.no_rate else
           f" — {gate.failures} of {gate.measured} measured requests reproduced the bug "
           f"({', '.join(gate.fail_on)}; it must exceed {gate.allowed})."
           if gate.role == Role.CONTROL else
           f" — {gate.failures} of {gate.measured} measured requests failed the gate "
           f"(fail on: {', '.join(gate.fail_on)}; allowed {gate.allowed})."),
        "",
    ]
    if gate.role == Role.CANDIDATE and gate.failures > gate.allowed \
            and gate.lower_bound_95 is not None:
        lines.append(f"Bound: {gate.failures} of {gate.measured} failed: the failure rate is "
                     f"above {_fmt(gate.lower_bound_95, 100, 2)}% at 95% confidence "
                     f"(and below {_fmt(gate.upper_bound_95, 100, 2)}%).")
    elif gate.role == Role.CANDIDATE and gate.upper_bound_95 is not None:
        lines.append(f"Bound: {describe_bound(gate.failures, gate.measured)}.")
    elif gate.role == Role.CONTROL and gate.lower_bound_95 is not None:
        lines.append(f"Control reproduction rate: {gate.failures}/{gate.measured}"
                     + (f" (> {_fmt(gate.lower_bound_95, 100, 2)}% at 95% confidence)."
                        if gate.failures else ": did not reproduce."))
    lines += ["", f"What this run proves: {gate.statement}", ""]
    derived = run_level_text(report)
    if derived:
        lines += [derived, ""]
    for reason in gate.reasons:
        lines.append(f"- {reason}")
    for item in gate.not_checked:
        lines.append(f"- **Not checked:** {item}")
    lines += [
        "",
        "| | |",
        "|---|---|",
        f"| run id | {run.run_id} |",
        f"| server(s) | {', '.join(run.base_urls)} |",
        f"| model | {run.model or '-'} |",
        f"| load | {load_text(report)} |",
        f"| C128A layout | {words.layout} |",
        f"| vLLM | {', '.join(server.vllm_versions) or '-'} |",
    ]
    # Where /health was not routed, readiness rested on /v1/models alone: say so.
    lines += [f"| readiness | {r.base_url}: {r.readiness} |" for r in run.ready
              if r.readiness not in (None, BOTH_PROBES)]
    if words.processes:
        lines.append(f"| patch receipts | {words.processes} |")
    if words.receipts:
        lines += ["", words.receipts]
    answers = answers_lines(report)
    if answers:
        lines += ["", "## Answers checked exactly (measurement)", "", *answers]
    sessions = session_lines(report)
    if sessions:
        lines += ["", "## Sessions, turn by turn (measurement)", "", *sessions]
    reference = reference_lines(report.stats.reference)
    if reference:
        lines += ["", "## Reference phase: the same server alone", "", *reference]
    if words.telemetry or words.telemetry_note:
        lines += ["", "## Server telemetry (/metrics)", ""]
    if words.telemetry:
        lines += ["| " + " | ".join(words.columns) + " |",
                  "|---|" + "---:|" * (len(words.columns) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in words.telemetry]
    if words.telemetry_note:
        lines += ["", words.telemetry_note + "."]
    client = run.client
    if client.saturated:
        lines += ["", "> " + client_saturation(client)]
    for name, ph in report.phase_summaries.items():
        lat = ph.latency_s
        lines += [
            "", f"## {name}: {ph.requests} requests", "",
            "| verdict | requests | rate |", "|---|---:|---:|",
        ]
        for verdict, count in ph.verdicts.items():
            lines.append(f"| {verdict} | {count} | {_fmt(ph.rates.get(verdict), 100, 1)}% |")
        lines += [
            "",
            "finish reasons: " + (", ".join(f"{k} {v}" for k, v in ph.finish_reasons.items())
                                  or "-"),
            "",
            "| latency (s) | p50 | p90 | p99 | max |", "|---|---:|---:|---:|---:|",
        ]
        for label, key in (("TTFT", "ttft"), ("inter-token", "inter_token"), ("end-to-end", "e2e")):
            p = lat[key]
            lines.append(f"| {label} | {_fmt(p['p50'])} | {_fmt(p['p90'])} | {_fmt(p['p99'])}"
                         f" | {_fmt(p['max'])} |")
        lines += ["", f"tokens/s {_fmt(ph.tokens_per_s, 1, 1)}, requests/s "
                  f"{_fmt(ph.requests_per_s, 1, 2)}, completion tokens "
                  f"{ph.tokens.completion}"]
    buckets = gate.spread.buckets
    if gate.failures and buckets:
        lines += ["", "## Failures by request order (measurement)", "",
                  gate.spread.statement() + ".", "",
                  "| from seq | requests | failed | rate |", "|---:|---:|---:|---:|"]
        lines += [f"| {b.first_seq} | {b.requests} | {b.failures} | "
                  f"{100 * b.failures / b.requests:.1f}% |" for b in buckets]
    for name, st in report.stats.phases.items():
        if not st.failures:
            continue
        lines += ["", f"## First failures ({name})"]
        for f in st.failures:
            error = f", error: {f.error}" if f.error else ""
            lines += ["", f"### seq {f.seq}: {', '.join(f.verdicts)}",
                      f"finish_reason {f.finish_reason}, completion tokens "
                      f"{f.completion_tokens}{error}"]
            lines += [f"- {line}" for line in findings_lines(f.why)]
            if f.reasoning_tail:
                lines += ["", "reasoning tail:", _fence(f.reasoning_tail)]
            if f.content_tail:
                lines += ["", "content tail:", _fence(f.content_tail)]
    return "\n".join(lines) + "\n"
