"""report.md: what a person pastes into a bug report or a release ticket."""

from __future__ import annotations

from typing import Any

from loadgen.exit_codes import EXIT_WORDS
from loadgen.judge.aggregate import RunStats
from loadgen.judge.bounds import describe_bound
from loadgen.judge.gate import GateResult


def _fmt(value: float | None, scale: float = 1.0, digits: int = 3) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


def _fence(text: str) -> str:
    return "```text\n" + text.replace("```", "'''") + "\n```"


def render_markdown(summary: dict[str, Any], stats: RunStats, gate: GateResult) -> str:
    target = summary.get("target") or {}
    versions = target.get("vllm_versions") or target.get("server_versions") or []
    lines = [
        f"# dsv4-qual: {summary.get('scenario')} ({gate.role})",
        "",
        f"**{EXIT_WORDS.get(gate.exit_code, gate.exit_code)}** (exit {gate.exit_code})"
        f" — {gate.failures} of {gate.measured} measured requests failed the gate "
        f"(fail on: {', '.join(gate.fail_on)}; allowed {gate.allowed}).",
        "",
    ]
    if gate.role == "candidate" and gate.measured:
        lines.append(f"Bound: {describe_bound(gate.failures, gate.measured)}.")
    elif gate.role == "control" and gate.measured:
        lb = gate.lower_bound_95
        lines.append(f"Control reproduction rate: {gate.failures}/{gate.measured}"
                     f" (> {_fmt(lb, 100, 2)}% at 95% confidence).")
    for reason in gate.reasons:
        lines.append(f"- {reason}")
    lines += [
        "",
        "| | |",
        "|---|---|",
        f"| run id | {summary.get('run_id')} |",
        f"| server(s) | {', '.join(target.get('base_urls') or [])} |",
        f"| model | {target.get('model') or '-'} |",
        f"| C128A layout | {layout_text(target)} |",
        f"| vLLM | {', '.join(versions) or '-'} |",
    ]
    receipts = target.get("receipts") or {}
    if receipts.get("count"):
        lines.append(f"| patch receipts | {receipts['count']} process(es), patched="
                     f"{receipts.get('patched')}, stride violations "
                     f"{receipts.get('stride_violations', 0)} |")
    receipts_line = receipts_text(target.get("receipts_selection") or {})
    if receipts_line:
        lines += ["", receipts_line]
    lines += telemetry_lines(summary.get("telemetry") or {})
    client = summary.get("client") or {}
    if client.get("saturated"):
        lines += ["", "> **Client saturated**: the load generator's own CPU or event loop "
                  f"was the bottleneck (CPU {client.get('cpu_util')}, loop lag p99 "
                  f"{client.get('loop_lag_ms_p99')} ms); timings are the client's."]
    for name, ph in (summary.get("phases") or {}).items():
        lat = ph["latency_s"]
        lines += [
            "", f"## {name}: {ph['requests']} requests", "",
            "| verdict | requests | rate |", "|---|---:|---:|",
        ]
        for verdict, count in ph["verdicts"].items():
            lines.append(f"| {verdict} | {count} | {_fmt(ph['rates'].get(verdict), 100, 1)}% |")
        lines += [
            "",
            "finish reasons: " + (", ".join(f"{k} {v}" for k, v in ph["finish_reasons"].items())
                                  or "-"),
            "",
            "| latency (s) | p50 | p90 | p99 | max |", "|---|---:|---:|---:|---:|",
        ]
        for label, key in (("TTFT", "ttft"), ("inter-token", "inter_token"), ("end-to-end", "e2e")):
            p = lat[key]
            lines.append(f"| {label} | {_fmt(p['p50'])} | {_fmt(p['p90'])} | {_fmt(p['p99'])}"
                         f" | {_fmt(p['max'])} |")
        lines += ["", f"tokens/s {_fmt(ph['tokens_per_s'], 1, 1)}, requests/s "
                  f"{_fmt(ph['requests_per_s'], 1, 2)}, completion tokens "
                  f"{ph['tokens']['completion']}"]
    for name, st in stats.phases.items():
        if not st.failures:
            continue
        lines += ["", f"## First failures ({name})"]
        for f in st.failures:
            error = f", error: {f['error']}" if f["error"] else ""
            lines += ["", f"### seq {f['seq']}: {', '.join(f['verdicts'])}",
                      f"finish_reason {f['finish_reason']}, completion tokens "
                      f"{f['completion_tokens']}{error}"]
            if f["reasoning_tail"]:
                lines += ["", "reasoning tail:", _fence(f["reasoning_tail"])]
            if f["content_tail"]:
                lines += ["", "content tail:", _fence(f["content_tail"])]
    return "\n".join(lines) + "\n"


def layout_text(target: dict[str, Any]) -> str:
    """The layout the server ran, and where we learnt it."""
    layout = target.get("c128a_layout")
    if not layout:
        return "unknown (no current patch receipt, no layout gauge in /metrics)"
    source = target.get("c128a_layout_source")
    return f"{layout} (from {source})" if source else str(layout)


def receipts_text(selection: dict[str, Any]) -> str:
    """Which receipts were counted and why; empty when no receipts were looked for."""
    ignored = selection.get("ignored") or 0
    if not selection.get("kept") and not ignored:
        directory = selection.get("receipts_dir")
        return f"No patch receipt found in {directory}." if directory else ""
    text = (f"Patch receipts counted: {selection.get('kept', 0)}, those written since "
            f"{selection.get('basis')}")
    if ignored:
        text += (f"; {ignored} older receipt(s) ignored (an earlier server start: "
                 f"{', '.join(selection.get('ignored_files') or [])[:300]})")
    return text + "."


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def telemetry_lines(telemetry: dict[str, Any]) -> list[str]:
    """The server's side of the run, from its /metrics (absent: nothing to say)."""
    servers = telemetry.get("servers") or {}
    if not servers:
        return []
    lines = ["", "## Server telemetry (/metrics)", "",
             "| server | samples | max running | max waiting | max KV cache | prompt tok/s "
             "| generation tok/s | preemptions | spec-decode acceptance |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for url, b in servers.items():
        kv = b.get("max_kv_cache_usage")
        lines.append(
            f"| {url} | {b['samples']} | {_num(b.get('max_requests_running'), '.0f')} "
            f"| {_num(b.get('max_requests_waiting'), '.0f')} "
            f"| {_num(None if kv is None else 100 * kv, '.1f')}% "
            f"| {_num(b.get('prompt_tokens_per_s'), '.1f')} "
            f"| {_num(b.get('generation_tokens_per_s'), '.1f')} "
            f"| {_num(b.get('preemptions'), '.0f')} "
            f"| {_acceptance(b)} |")
    return lines


def _acceptance(block: dict[str, Any]) -> str:
    rate = block.get("spec_acceptance_rate")
    if rate is None:
        return "-"
    return (f"{100 * rate:.1f}% ({block.get('spec_accepted_tokens'):.0f} of "
            f"{block.get('spec_draft_tokens'):.0f} drafted)")
