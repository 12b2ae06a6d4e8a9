"""A server that dies in the middle of a gate, under the documented compose command.

Contract under test (compose.yaml, the gate scenarios): the vLLM container is killed
(its main process, SIGKILL, as a crash or the OOM killer would) while the load
generator has requests in flight. Compose must not stop the load generator (that gave
exit 130, or 137 during its readiness wait); the run sees the server go away, stops,
writes every report with the reason and exits 2 (run invalid), and `docker compose`
returns 2. Docker restarts the server (restart: on-failure), ready for the next run.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
import tier_timings
from compose_project import RESULTS_VOLUME, ComposeProject, results_dirs, wait_for
from tier_scenarios import LONG

pytestmark = [pytest.mark.docker, pytest.mark.timeout(2400)]

RECORDS_BEFORE_KILL = 20


def _records(compose: ComposeProject) -> int:
    found = results_dirs(compose.daemon, RESULTS_VOLUME, LONG.name)
    if not found or not (found[-1] / "records.jsonl").is_file():
        return 0
    return len((found[-1] / "records.jsonl").read_text().splitlines())


def test_a_server_killed_mid_run_gives_an_invalid_gate_with_its_reason(
        compose: ComposeProject) -> None:
    assert not results_dirs(compose.daemon, RESULTS_VOLUME, LONG.name)
    with tier_timings.stage("compose up, server killed mid-run"):
        gate = compose.start_gate("loadgen", extra_env={"DSV4_SCENARIO": LONG.container_path})
        try:
            wait_for(lambda: _records(compose) or gate.poll() is not None, timeout_s=600,
                     what="the run's first record")
            server_pid = compose.main_pid("server")
            wait_for(lambda: _records(compose) >= RECORDS_BEFORE_KILL or gate.poll() is not None,
                     timeout_s=600, what="the run's records", interval_s=0.1)
            assert gate.poll() is None, "the run ended before the server was killed"
            os.kill(server_pid, signal.SIGKILL)
            output, _ = gate.communicate(timeout=600)
        except BaseException:
            gate.kill()
            raise
    assert gate.returncode == 2, output[-4000:]
    (results,) = results_dirs(compose.daemon, RESULTS_VOLUME, LONG.name)
    summary = json.loads((results / "summary.json").read_text())
    gate_doc = summary["gate"]
    assert (gate_doc["exit_code"], gate_doc["passed"]) == (2, False)
    assert any("went away during the run" in reason for reason in gate_doc["reasons"]), gate_doc
    assert summary["run"]["server_restarts"] >= 1
    records = (results / "records.jsonl").read_text().splitlines()
    assert RECORDS_BEFORE_KILL <= len(records) < LONG.measurement
    for name in ("report.md", "junit.xml", "report.html", "server.json"):
        assert (results / name).is_file(), name
    loadgen_state = compose.inspect("loadgen")["State"]
    assert isinstance(loadgen_state, dict)
    assert loadgen_state["ExitCode"] == 2, "the load generator's own code, not a signal's"


def test_the_killed_server_comes_back(compose: ComposeProject) -> None:
    """restart: on-failure brings it back healthy, for the next run (or the soak)."""
    def healthy() -> bool:
        state = compose.inspect("server")["State"]
        assert isinstance(state, dict)
        return state.get("Health", {}).get("Status") == "healthy"

    try:
        wait_for(healthy, timeout_s=300, what="the restarted server's health")
    except TimeoutError:
        pytest.fail(compose.logs("server")[-4000:])
    assert int(compose.inspect("server")["RestartCount"]) >= 1  # type: ignore[call-overload]

