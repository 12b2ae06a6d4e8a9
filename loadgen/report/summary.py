"""summary.json: the machine-readable result of a run (a public contract)."""

from __future__ import annotations

from typing import Any

from loadgen.judge.aggregate import PhaseStats, RunStats, percentiles
from loadgen.judge.gate import GateResult
from loadgen.target.telemetry_summary import summarize as summarize_telemetry


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
            "c128a_layout_source": server.get("c128a_layout_source"),
            "vllm_versions": receipts.get("vllm_versions"),
            "server_versions": server_versions(server),
            "receipts": receipts,
            "receipts_selection": server.get("receipts_selection"),
        },
        "telemetry": summarize_telemetry(server),
        "phases": {name: phase_summary(st) for name, st in stats.phases.items()},
        "divergent_seqs": sorted(stats.divergent)[:1000],
        "gate": gate.to_dict(),
        "client": run.get("client") or {},
    }


def server_versions(server: dict[str, Any]) -> list[str]:
    """What each server's /version said (vLLM answers {"version": "0.27.1"})."""
    found = set()
    for info in (server.get("servers") or {}).values():
        version = info.get("version")
        if isinstance(version, dict) and version.get("version"):
            found.add(str(version["version"]))
    return sorted(found)
