"""summary.json: the machine-readable result of a run (a public contract)."""

from __future__ import annotations

from typing import Any

from loadgen.judge.aggregate import PhaseStats, percentiles
from loadgen.judge.run_report import RunReport
from loadgen.taxonomy import RUN_LEVEL


def phase_summary(st: PhaseStats) -> dict[str, Any]:
    wall = st.wall_s
    tokens = sum(st.completion_tokens)
    measured = st.measured
    return {
        "requests": st.requests,
        "measured": measured,
        "verdicts": dict(sorted(st.verdicts.items())),
        # Counted from the records like the rest, but judged over the whole run.
        "run_level_verdicts": sorted(v.value for v in RUN_LEVEL if st.verdicts.get(v.value)),
        "primary_verdicts": dict(sorted(st.primary.items())),
        "rates": {k: (v / measured if measured else None) for k, v in sorted(st.verdicts.items())},
        "finish_reasons": dict(sorted(st.finish_reasons.items())),
        "infra_errors": st.infra_errors,
        "interrupted": st.interrupted,
        "failed": len(st.failing_seqs),
        "latency_s": {
            "ttft": percentiles(st.ttft),
            "inter_token": percentiles(st.gap_mean),
            "e2e": percentiles(st.e2e),
        },
        "tokens": {
            "completion": tokens,
            "reasoning": st.reasoning_tokens,
            "prompt": st.prompt_tokens,
            "completion_per_request": percentiles([float(x) for x in st.completion_tokens]),
        },
        "wall_s": wall,
        "tokens_per_s": (tokens / wall) if wall else None,
        "requests_per_s": (st.requests / wall) if wall else None,
    }


def summary_document(report: RunReport) -> dict[str, Any]:
    server = report.server
    return {
        "scenario": report.scenario.name,
        "run_id": report.run.run_id,
        "run": report.run.to_dict(),
        "target": {
            "base_urls": report.run.base_urls,
            "model": report.run.model,
            "c128a_layout": server.layout,
            "c128a_layout_source": server.layout_source,
            "vllm_versions": server.receipts.vllm_versions,
            "server_versions": server.versions,
            "receipts": server.receipts.summary(),
            "receipts_selection": server.selection or None,
        },
        "telemetry": server.telemetry,
        "phases": {name: phase_summary(st) for name, st in report.stats.phases.items()},
        "divergent_seqs": sorted(report.stats.divergent)[:1000],
        "gate": report.gate.to_dict(),
        "client": report.run.client,
    }
