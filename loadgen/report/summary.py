"""summary.json: the machine-readable result of a run (a public contract)."""

from __future__ import annotations

from typing import Any

from loadgen.judge.run_report import RunReport


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
        "phases": report.phase_summaries,
        "divergent_seqs": sorted(report.stats.divergent)[:1000],
        "gate": report.gate.to_dict(),
        "client": report.run.client,
    }
