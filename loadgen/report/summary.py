"""summary.json: the machine-readable result of a run (a public contract)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from loadgen.judge.gate.run_report import RunReport
from loadgen.results.run_level import RUN_LEVEL_FILE
from loadgen.targets.receipts import ReceiptsSelection
from loadgen.taxonomy import Verdict


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
            "receipts_selection": (server.selection.to_dict()
                                   if server.selection != ReceiptsSelection() else None),
        },
        "telemetry": server.telemetry.to_dict(),
        "phases": {name: ph.to_dict() for name, ph in report.phase_summaries.items()},
        "divergent_seqs": report.stats.seqs_with(Verdict.DIVERGENT)[:1000],
        "run_level": run_level_summary(report),
        "reference": report.stats.reference.to_dict() if report.stats.reference else None,
        "load": report.run.load.to_dict() if report.run.load else None,
        "gate": report.gate.to_dict(),
        "client": asdict(report.run.client),
    }


def run_level_summary(report: RunReport) -> dict[str, Any]:
    """What the run-level rules changed, per phase and verdict (details: run_level.jsonl)."""
    added: dict[str, dict[str, int]] = {}
    replaced: dict[str, dict[str, int]] = {}
    for c in report.stats.changed:
        for v in c.run_level:
            added.setdefault(c.phase, {}).setdefault(v, 0)
            added[c.phase][v] += 1
        for v in c.replaced:
            replaced.setdefault(c.phase, {}).setdefault(v, 0)
            replaced[c.phase][v] += 1
    return {"file": RUN_LEVEL_FILE, "records_changed": len(report.stats.changed),
            "added": added, "replaced": replaced}
