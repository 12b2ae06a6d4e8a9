"""summary.json: the machine-readable result of a run (a public contract)."""

from __future__ import annotations

from typing import Any

from .aggregate import PhaseStats, RunStats, percentiles
from .gate import GateResult


def phase_summary(st: PhaseStats) -> dict[str, Any]:
    wall = st.wall_s
    tokens = sum(st.completion_tokens)
    measured = st.measured
    return {
        "requests": st.requests,
        "measured": measured,
        "verdicts": dict(sorted(st.verdicts.items())),
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


def build_summary(
    scenario: dict[str, Any],
    run: dict[str, Any],
    stats: RunStats,
    gate: GateResult,
    server: dict[str, Any],
) -> dict[str, Any]:
    receipts = server.get("receipts_summary") or {}
    return {
        "scenario": scenario.get("name"),
        "run_id": run.get("run_id"),
        "run": run,
        "target": {
            "base_urls": run.get("base_urls"),
            "model": run.get("model"),
            "c128a_layout": server.get("c128a_layout"),
            "vllm_versions": receipts.get("vllm_versions"),
            "receipts": receipts,
        },
        "phases": {name: phase_summary(st) for name, st in stats.phases.items()},
        "divergent_seqs": sorted(stats.divergent)[:1000],
        "gate": gate.to_dict(),
        "client": run.get("client") or {},
    }
