"""`docker compose -f compose.sim.yaml up --exit-code-from loadgen loadgen`: the gate
against the embedded sim, in containers, on a machine with no GPU.

Contract under test: compose.sim.yaml (docker/Dockerfile.sim for the sim, the loadgen
image for the run). The sim serves on the project network and writes its
receipt into its receipts volume; the load generator waits for its health, runs the
sim's smoke scenario against it over HTTP, reads the receipt, writes its results into
the results volume and exits with the gate's code, which `docker compose` returns. The
sim serving the fix passes (0); the same file with DSV4_SIM_LAYOUT=packed serves the
bug, and the gate catches it (1), so it measures rather than waves through.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tier_timings
from compose_project import (
    RESULTS_VOLUME,
    SIM_RECEIPTS_VOLUME,
    ComposeProject,
    results_dirs,
    volume_path,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(2400)]

SCENARIO = "sim-smoke"
GATE_TIMEOUT_S = 900


def _gate(compose: ComposeProject, layout: str) -> tuple[int, dict[str, Any], Path, str]:
    """The documented command with the sim serving `layout`; (exit code, summary,
    results, output)."""
    before = set(results_dirs(compose.daemon, RESULTS_VOLUME, SCENARIO))
    with tier_timings.stage(f"compose -f compose.sim.yaml up, layout {layout}"):
        done = compose.up_gate("loadgen", timeout=GATE_TIMEOUT_S,
                               extra_env={"DSV4_SIM_LAYOUT": layout})
    output = f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    new = [p for p in results_dirs(compose.daemon, RESULTS_VOLUME, SCENARIO) if p not in before]
    assert len(new) == 1, f"expected one new results directory, found {new}:\n{output}"
    summary = json.loads((new[0] / "summary.json").read_text())
    return done.returncode, summary, new[0], output


def _receipt_layouts(compose: ComposeProject) -> set[str]:
    folder = volume_path(compose.daemon, SIM_RECEIPTS_VOLUME)
    return {json.loads(p.read_text()).get("layout") for p in folder.glob("*.json")}


def test_the_sim_file_passes_the_fix_and_fails_the_bug(sim_compose: ComposeProject) -> None:
    code, summary, results, output = _gate(sim_compose, "capacity")
    gate = summary["gate"]
    assert code == 0, f"{gate.get('statement')}\n{output}"
    assert (gate["role"], gate["passed"], gate["exit_code"]) == ("candidate", True, 0)
    measured = summary["phases"]["measurement"]
    assert measured["requests"] == 64 and measured["verdicts"] == {"ok": 64}
    for name in ("records.jsonl", "report.md", "junit.xml", "report.html", "server.json"):
        assert (results / name).is_file(), name
    # The sim's receipt came through the volume: the gate rests on the fix it names.
    server_doc = json.loads((results / "server.json").read_text())
    assert server_doc["receipts_summary"]["layouts"] == ["capacity"]
    assert _receipt_layouts(sim_compose) == {"capacity"}

    # The same file serving the bug: Compose recreates the sim with the new layout,
    # the gate reads the new start's receipt (not the old one still in the volume) and
    # fails.
    code, summary, results, output = _gate(sim_compose, "packed")
    gate = summary["gate"]
    assert code == 1, f"{gate.get('statement')}\n{output}"
    assert (gate["passed"], gate["exit_code"]) == (False, 1)
    server_doc = json.loads((results / "server.json").read_text())
    assert server_doc["receipts_summary"]["layouts"] == ["packed"]
    failed = {name for name, n in summary["phases"]["measurement"]["verdicts"].items()
              if name != "ok" and n}
    assert failed, "the bug was served and no reply failed"

    # The documented way to get the reports out: from the stopped load generator.
    assert sim_compose.container_id("loadgen")
