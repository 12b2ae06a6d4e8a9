"""A server that dies in the middle of a gate, under the documented compose command.

Contract under test (compose.yaml, the gate scenarios): the vLLM container is killed
(its main process, SIGKILL, as a crash or the OOM killer would) while the load
generator has requests in flight. Compose must not stop the load generator (that gave
exit 130, or 137 during its readiness wait), whether or not the command names it after
`up`; the run sees the server go away, stops, writes every report with the reason and
exits 2 (run invalid), and `docker compose` returns 2. Docker restarts the server
(restart: on-failure), ready for the next run.
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


def _kill_server_mid_run(compose: ComposeProject, *, name_service: bool) -> tuple[int, str]:
    """Start the gate, SIGKILL the server's main process once records flow; (exit, output)."""
    runs_before = len(results_dirs(compose.daemon, RESULTS_VOLUME, LONG.name))
    gate = compose.start_gate("loadgen", extra_env={"DSV4_SCENARIO": LONG.container_path},
                              name_service=name_service)

    def records_now() -> int:
        found = results_dirs(compose.daemon, RESULTS_VOLUME, LONG.name)
        return _records(compose) if len(found) > runs_before else 0

    try:
        wait_for(lambda: records_now() or gate.poll() is not None, timeout_s=600,
                 what="the run's first record")
        server_pid = compose.main_pid("server")
        wait_for(lambda: records_now() >= RECORDS_BEFORE_KILL or gate.poll() is not None,
                 timeout_s=600, what="the run's records", interval_s=0.1)
        if gate.poll() is not None:
            pytest.fail("the run ended before the server was killed:\n"
                        + gate.communicate()[0][-4000:])
        os.kill(server_pid, signal.SIGKILL)
        output, _ = gate.communicate(timeout=600)
    except BaseException:
        gate.kill()
        raise
    return gate.returncode, output


def _assert_invalid_with_its_reason(compose: ComposeProject) -> None:
    results = results_dirs(compose.daemon, RESULTS_VOLUME, LONG.name)[-1]
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


def _healthy(compose: ComposeProject) -> bool:
    state = compose.inspect("server")["State"]
    assert isinstance(state, dict)
    return state.get("Health", {}).get("Status") == "healthy"


def test_a_server_killed_mid_run_gives_an_invalid_gate_with_its_reason(
        compose: ComposeProject) -> None:
    """The documented command, `up --exit-code-from loadgen loadgen`."""
    with tier_timings.stage("compose up, server killed mid-run"):
        code, output = _kill_server_mid_run(compose, name_service=True)
    assert code == 2, output[-4000:]
    _assert_invalid_with_its_reason(compose)
    # restart: on-failure brings the server back, healthy, for the next run.
    try:
        wait_for(lambda: _healthy(compose), timeout_s=300, what="the restarted server")
    except TimeoutError:
        pytest.fail(compose.logs("server")[-4000:])
    assert int(compose.inspect("server")["RestartCount"]) >= 1  # type: ignore[call-overload]


def test_without_the_service_named_after_up_the_result_is_the_same(
        compose: ComposeProject) -> None:
    """`up --exit-code-from loadgen` attaches every service that is not `attach: false`:
    the servers are not, so a server's exit still leaves the run to say what happened
    (before, Compose stopped the load generator: exit 130, or 137)."""
    with tier_timings.stage("compose up (service not named), server killed mid-run"):
        code, output = _kill_server_mid_run(compose, name_service=False)
    assert code == 2, output[-4000:]
    _assert_invalid_with_its_reason(compose)
