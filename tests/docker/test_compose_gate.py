"""`docker compose up --exit-code-from loadgen loadgen`, end to end on the CPU: the
download, the patched vLLM server in its container, the load generator in its own, and
the gate's exit code passed through Compose.

Contract under test: compose.yaml's default services with tests/docker/compose.cpu.yaml
(see docs/testing.md, "The docker test tier"). The server serves the tiny model at a pinned
revision from the HF cache volume; every vLLM process of the container writes a patch
receipt into the receipts volume; the load generator waits for the server's health,
runs the scenario named by DSV4_SCENARIO, writes its results into the results volume
and exits with the gate's code, which `docker compose` returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tier_timings
from compose_project import (
    RECEIPTS_VOLUME,
    RESULTS_VOLUME,
    ComposeProject,
    results_dirs,
    volume_path,
)
from tier_scenarios import CLEAN, IGNORED, STUCK, TierScenario

pytestmark = [pytest.mark.docker, pytest.mark.timeout(2400)]

# vLLM loads general plugins in its API server, its engine core and each worker.
PLUGIN_PROCESSES = {"MainProcess", "EngineCore", "VllmWorker-0"}
GATE_TIMEOUT_S = 900


def _gate(compose: ComposeProject, scenario: TierScenario) -> tuple[int, dict[str, Any], Path]:
    """Run the documented gate command with this scenario; (exit code, summary, results)."""
    with tier_timings.stage(f"compose up, {scenario.name} gate"):
        done = compose.up_gate("loadgen", timeout=GATE_TIMEOUT_S,
                               extra_env={"DSV4_SCENARIO": scenario.container_path})
    found = results_dirs(compose.daemon, RESULTS_VOLUME, scenario.name)
    assert found, f"no results directory:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    summary = json.loads((found[-1] / "summary.json").read_text())
    return done.returncode, summary, found[-1]


def _receipts(compose: ComposeProject, hostname: str) -> list[dict[str, Any]]:
    folder = volume_path(compose.daemon, RECEIPTS_VOLUME)
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"{hostname}-*.json"))]


def test_a_clean_candidate_passes_and_compose_returns_0(compose: ComposeProject) -> None:
    code, summary, results = _gate(compose, CLEAN)
    assert code == 0, summary["gate"]
    gate = summary["gate"]
    assert (gate["role"], gate["passed"], gate["exit_code"]) == ("candidate", True, 0)
    assert summary["phases"]["measurement"]["requests"] == CLEAN.measurement
    # The random weights' noise is detected and said, not gated: the scenario names it.
    assert sorted(gate["ignored"]) == sorted(IGNORED)
    detected = {v for v in summary["phases"]["measurement"]["verdicts"] if v != "ok"}
    assert set(gate["not_gated"]) == detected <= set(IGNORED)
    if detected:
        assert "ignored by gate.ignore" in gate["statement"]
    for name in ("records.jsonl", "report.md", "junit.xml", "report.html", "server.json"):
        assert (results / name).is_file(), name
    # The receipts the gate required came through the volume, from this server.
    server_doc = json.loads((results / "server.json").read_text())
    assert server_doc["receipts_summary"]["patched"] is True
    assert server_doc["receipts_summary"]["layouts"] == ["capacity"]
    # Only the worker loaded the model (the tiny Qwen3: no C128A layers), and the gate
    # says it rests on the replies alone.
    assert server_doc["receipts_summary"]["model_processes"] == 1
    (receipts,) = [c for c in gate["checks"] if c["name"].startswith("patch receipts")]
    assert receipts["passed"] and "has no C128A layers" in receipts["message"]


def test_every_vllm_process_in_the_container_writes_its_receipt(
        compose: ComposeProject) -> None:
    """API server, engine core and worker of the server container: each loaded the
    plugin installed by Dockerfile.server and patched to the capacity layout."""
    if not results_dirs(compose.daemon, RESULTS_VOLUME, CLEAN.name):
        _gate(compose, CLEAN)
    hostname = str(compose.inspect("server")["Config"]["Hostname"])  # type: ignore[index]
    receipts = _receipts(compose, hostname)
    names = {r["process_name"] for r in receipts}
    assert names >= PLUGIN_PROCESSES, names
    api = next(r for r in receipts if r["process_name"] == "MainProcess" and r["pid"] == 1)
    assert "vllm serve" in str(api["process"]), "the image's entry point runs the server"
    for receipt in receipts:
        assert receipt["hostname"] == hostname
        assert receipt["layout"] == "capacity" and receipt["patched"] is True
        assert receipt["strict"] is True
        assert str(receipt["vllm_version"]).startswith("0.32.0")


def test_a_failing_gate_passes_its_exit_code_through(compose: ComposeProject) -> None:
    """Replies stuck in reasoning (the #52448 signature): the gate fails, exit 1."""
    code, summary, _ = _gate(compose, STUCK)
    assert code == 1, summary["gate"]
    gate = summary["gate"]
    assert (gate["passed"], gate["exit_code"]) == (False, 1)
    measured = summary["phases"]["measurement"]
    assert measured["verdicts"]["stuck_in_reasoning"] == STUCK.measurement


def test_the_server_ran_the_pinned_revision_after_the_download(
        compose: ComposeProject) -> None:
    """The download service finished first and found the revision offline; the server
    loaded that revision's snapshot."""
    download = compose.inspect("download")
    state = download["State"]
    assert isinstance(state, dict)
    assert (state["Status"], state["ExitCode"]) == ("exited", 0)
    revision = compose.variables["DSV4_MODEL_REVISION"]
    assert f"snapshots/{revision}" in compose.logs("download")
    server = compose.inspect("server")
    args = server["Args"]
    assert isinstance(args, list)
    assert args[:2] == ["serve", compose.variables["DSV4_MODEL"]]
    assert f"--revision={revision}" in args
