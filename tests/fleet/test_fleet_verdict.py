"""`dsv4-qual fleet`: one answer for every node, read from the history they write to."""

from __future__ import annotations

import json
import random
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loadgen.exit_codes import ExitCode
from loadgen.fleet.verdict import NodeState, judge_fleet
from loadgen.history import History, RoundRow, Soak
from loadgen.history.statuses import RoundStatus
from tests.support.cli import run_cli
from tests.support.scenario_files import write_scenario

NOW = time.time()
HOUR = 3600.0


class FleetHistory:
    """A SQLite history written through the soak's own store, node by node."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = History(path)
        self.soaks = 0

    def round(self, host: str | None, *, hours_ago: float, exit_code: int | None,
              status: str = RoundStatus.COMPLETE, scenario: str = "nightly-soak",
              failures: int = 0, note: str | None = None, vllm: str = "0.27.1") -> None:
        self.soaks += 1
        soak_id = f"soak-{self.soaks}"
        started = NOW - hours_ago * HOUR
        self.store.add_soak(Soak(soak_id, scenario, f"/results/{soak_id}", started,
                                 "finished", None, 1, False), "test")
        self.store.start_round(soak_id, 1, started=started, scenario=scenario,
                               results_dir=f"/results/{soak_id}/round-0001", priming=0,
                               restart_detected=False, server_starts={},
                               identity={"host": host})
        if status == RoundStatus.RUNNING:
            return
        self.store.finish_round(soak_id, 1, status=status, note=note, ended=started + 60,
                                results={"exit_code": exit_code, "measured": 512,
                                         "gated_failures": failures, "allowed": 0,
                                         "vllm_version": vllm},
                                verdicts={"measurement": {"ok": 512 - failures}})

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def history(tmp_path: Path) -> FleetHistory:
    h = FleetHistory(tmp_path / "fleet.sqlite")
    yield h
    h.close()


def fleet(history: FleetHistory, *args: str):
    history.close()
    return run_cli("fleet", str(history.path), "--scenario", "nightly-soak", *args)


def test_every_node_passing_its_last_round_passes(history: FleetHistory,
                                                  tmp_path: Path) -> None:
    for node in ("gpu-1", "gpu-2", "gpu-3", "gpu-4"):
        history.round(node, hours_ago=30, exit_code=1, failures=3)  # yesterday: not tonight
        history.round(node, hours_ago=2, exit_code=0)
    done = fleet(history, "--since", "12h", "--nodes", "gpu-1,gpu-2", "--nodes", "gpu-3",
                 "--nodes", "gpu-4", "--junit", str(tmp_path / "f.xml"),
                 "--markdown", str(tmp_path / "f.md"), "--json-out", str(tmp_path / "f.json"))
    assert done.returncode == ExitCode.PASSED, done.stderr
    assert "FLEET PASSED: all 4 node(s) passed" in done.stderr
    suite = ET.parse(tmp_path / "f.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "0", "0")
    doc = json.loads((tmp_path / "f.json").read_text())
    assert [n["state"] for n in doc["nodes"]] == ["passed"] * 4
    assert "| gpu-3 | PASSED |" in (tmp_path / "f.md").read_text()


@pytest.mark.parametrize(("broken", "state", "words"), [
    ({"exit_code": 1, "failures": 7}, NodeState.GATE_FAILED, "7 of 512 failed"),
    ({"exit_code": 2, "note": "server went away and did not come back: connection refused"},
     NodeState.INVALID, "server went away"),
    ({"exit_code": None, "status": RoundStatus.PARTIAL, "note": "the soak's process died"},
     NodeState.PARTIAL, "process died"),
])
def test_one_broken_node_fails_the_fleet_and_is_named(history: FleetHistory, tmp_path: Path,
                                                      broken: dict, state: NodeState,
                                                      words: str) -> None:
    for node in ("gpu-1", "gpu-2", "gpu-4"):
        history.round(node, hours_ago=1, exit_code=0)
    history.round("gpu-3", hours_ago=1, **broken)
    done = fleet(history, "--since", "12h", "--nodes", "gpu-1,gpu-2,gpu-3,gpu-4",
                 "--junit", str(tmp_path / "f.xml"), "--json")
    assert done.returncode == ExitCode.GATE_FAILED
    doc = json.loads(done.stdout)
    (bad,) = [n for n in doc["nodes"] if not n["passed"]]
    assert (bad["node"], bad["state"]) == ("gpu-3", state)
    assert words in bad["why"]
    assert "FLEET FAILED: 1 of 4 node(s) did not pass: gpu-3" in done.stderr
    failures = ET.parse(tmp_path / "f.xml").getroot().findall("testcase/failure")
    assert [f.get("message").split(":")[0] for f in failures] == [state.name.replace("_", " ")]


def test_a_node_that_did_not_report_is_a_failure_never_a_pass(history: FleetHistory) -> None:
    for node in ("gpu-1", "gpu-2", "gpu-3"):
        history.round(node, hours_ago=1, exit_code=0)
    history.round("gpu-4", hours_ago=40, exit_code=0)  # passed, but two nights ago
    named = fleet(history, "--since", "12h", "--nodes", "gpu-1,gpu-2,gpu-3,gpu-4", "--json")
    assert named.returncode == ExitCode.GATE_FAILED
    assert {n["node"]: n["state"] for n in json.loads(named.stdout)["nodes"]}["gpu-4"] == \
        "no_report"
    # Not named: the history's look-back knows gpu-4 reported before, so it must now.
    unnamed = run_cli("fleet", str(history.path), "--since", "12h", "--json")
    assert unnamed.returncode == ExitCode.GATE_FAILED
    assert "gpu-4 (no report)" in unnamed.stderr
    # A look-back too short to see it: the answer rests on the nodes that reported, and
    # says so (name them with --nodes to be sure).
    short = run_cli("fleet", str(history.path), "--since", "12h", "--lookback", "1h",
                    "--json")
    assert short.returncode == ExitCode.PASSED
    assert "name them with --nodes" in json.loads(short.stdout)["expected_from"]


def test_the_last_finished_round_decides_and_a_running_one_waits(
        history: FleetHistory) -> None:
    history.round("gpu-1", hours_ago=3, exit_code=1, failures=2)
    history.round("gpu-1", hours_ago=1, exit_code=0)  # fixed since: passes
    history.round("gpu-2", hours_ago=3, exit_code=0)
    history.round("gpu-2", hours_ago=1, exit_code=1, failures=1)  # broke since: fails
    history.round("gpu-3", hours_ago=2, exit_code=0)
    history.round("gpu-3", hours_ago=0.1, exit_code=None, status=RoundStatus.RUNNING)
    done = fleet(history, "--since", "12h", "--json")
    states = {n["node"]: n["state"] for n in json.loads(done.stdout)["nodes"]}
    assert states == {"gpu-1": "passed", "gpu-2": "gate_failed", "gpu-3": "passed"}
    assert done.returncode == ExitCode.GATE_FAILED


def test_a_node_still_in_its_first_round_leaves_the_answer_open(history: FleetHistory) -> None:
    history.round("gpu-1", hours_ago=1, exit_code=0)
    history.round("gpu-2", hours_ago=0.1, exit_code=None, status=RoundStatus.RUNNING)
    done = fleet(history, "--since", "12h")
    assert done.returncode == ExitCode.RUN_INVALID
    assert "FLEET NOT YET DECIDED" in done.stderr and "gpu-2" in done.stderr


def test_no_node_known_is_invalid_not_a_pass(history: FleetHistory) -> None:
    history.round("gpu-1", hours_ago=1, exit_code=0, scenario="release-gate")
    done = fleet(history, "--since", "12h")
    assert done.returncode == ExitCode.RUN_INVALID
    assert "FLEET INVALID" in done.stderr


def test_filters_pick_the_release(history: FleetHistory) -> None:
    history.round("gpu-1", hours_ago=2, exit_code=1, failures=4, vllm="0.27.0")
    history.round("gpu-1", hours_ago=1, exit_code=0, vllm="0.27.1")
    history.round("gpu-2", hours_ago=1, exit_code=0, vllm="0.27.1")
    assert fleet(history, "--vllm", "0.27.1").returncode == ExitCode.PASSED
    assert run_cli("fleet", str(history.path), "--scenario", "nightly-soak",
                   "--vllm", "0.27.0").returncode == ExitCode.GATE_FAILED


@pytest.mark.parametrize(("args", "words"), [
    (("--since", "yesterday"), "neither a duration"),
    (("--lookback", "7 weeks"), "--lookback"),
    (("--nodes-file", "/nonexistent/nodes.txt"), "--nodes-file"),
])
def test_bad_input_is_one_line_and_exit_3(history: FleetHistory, args: tuple[str, ...],
                                          words: str) -> None:
    done = fleet(history, *args)
    assert done.returncode == ExitCode.BAD_INPUT
    assert words in done.stderr and "Traceback" not in done.stderr


def test_a_missing_history_is_bad_input(tmp_path: Path) -> None:
    done = run_cli("fleet", str(tmp_path / "none.sqlite"))
    assert done.returncode == ExitCode.BAD_INPUT
    assert "Traceback" not in done.stderr


def test_random_fleets_fail_exactly_when_a_node_did_not_pass() -> None:
    """Generated fleets: the answer is 0 only when every expected node's last finished
    round passed, 1 whenever one failed or is missing, whatever the order of rounds."""
    rng = random.Random(7)
    outcomes = [(RoundStatus.COMPLETE, 0), (RoundStatus.COMPLETE, 1),
                (RoundStatus.COMPLETE, 2), (RoundStatus.PARTIAL, None)]
    for _ in range(300):
        nodes = [f"n{i}" for i in range(rng.randint(1, 6))]
        rows, last_state = [], {}
        for node in nodes:
            t = NOW - 20 * HOUR
            for _ in range(rng.randint(0, 3)):
                t += rng.uniform(0.5, 5) * HOUR
                status, code = rng.choice(outcomes)
                rows.append(RoundRow(soak_id=f"soak-{node}", round=len(rows) + 1,
                                     host=node, started=t, status=status,
                                     exit_code=code, measured=10))
                if t >= NOW - 12 * HOUR:
                    last_state[node] = (status, code)
        rng.shuffle(rows)
        v = judge_fleet(rows, since=NOW - 12 * HOUR, until=NOW + 1, expected=nodes)
        all_passed = all(last_state.get(n) == (RoundStatus.COMPLETE, 0) for n in nodes)
        assert (v.exit_code == ExitCode.PASSED) == all_passed, (nodes, rows)
        assert (v.exit_code == ExitCode.GATE_FAILED) == (not all_passed)
        assert {n.node for n in v.failed_nodes} == {
            n for n in nodes if last_state.get(n) != (RoundStatus.COMPLETE, 0)}


QUALIFY_SC = {"load": {"measurement": 12}, "workload": {"accounts": 64},
              "gate": {"min_measured": 1}}


def test_a_qualification_across_nodes_names_the_node_that_did_not_qualify(
        fake_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each node runs `qualify` into one shared folder; `fleet FOLDER` reads every
    qualify.json: QUALIFIED passes, a candidate that failed its gate fails that node,
    a node that never qualified fails too."""
    scenario = write_scenario(tmp_path / "q.toml", QUALIFY_SC)
    shared = tmp_path / "shared"
    for node, candidate_plan in (("gpu-1", ["ok"]), ("gpu-2", ["ok"]), ("gpu-3", ["stuck"])):
        _, control = fake_server(["stuck"] * 12)
        _, candidate = fake_server(candidate_plan * 12)
        monkeypatch.setenv("DSV4_QUAL_HOST", node)
        done = run_cli("qualify", str(scenario), "--control", control.url, "--candidate",
                       candidate.url, "--out", str(shared / node), "--quiet")
        assert done.returncode == (1 if node == "gpu-3" else 0), done.stderr
    verdict = run_cli("fleet", str(shared), "--nodes", "gpu-1,gpu-2,gpu-3,gpu-4",
                      "--since", "1h", "--junit", str(tmp_path / "q.xml"), "--json")
    assert verdict.returncode == ExitCode.GATE_FAILED, verdict.stderr
    nodes = {n["node"]: n for n in json.loads(verdict.stdout)["nodes"]}
    assert {k: v["state"] for k, v in nodes.items()} == {
        "gpu-1": "passed", "gpu-2": "passed", "gpu-3": "gate_failed", "gpu-4": "no_report"}
    assert nodes["gpu-1"]["why"].startswith("QUALIFIED")
    assert nodes["gpu-3"]["why"].startswith("NOT QUALIFIED")
    # Without gpu-4, and with gpu-3 qualified again later, the fleet qualifies.
    _, control = fake_server(["stuck"] * 12)
    _, candidate = fake_server(["ok"] * 12)
    monkeypatch.setenv("DSV4_QUAL_HOST", "gpu-3")
    assert run_cli("qualify", str(scenario), "--control", control.url, "--candidate",
                   candidate.url, "--out", str(shared / "gpu-3-again"),
                   "--quiet").returncode == 0
    again = run_cli("fleet", str(shared), "--nodes", "gpu-1,gpu-2,gpu-3", "--since", "1h")
    assert again.returncode == ExitCode.PASSED, again.stderr


def test_an_unreadable_qualification_is_a_failure_never_skipped(tmp_path: Path) -> None:
    (tmp_path / "gpu-9").mkdir()
    (tmp_path / "gpu-9" / "qualify.json").write_text("{ cut")
    done = run_cli("fleet", str(tmp_path), "--since", "1h", "--json")
    assert done.returncode == ExitCode.GATE_FAILED
    (node,) = json.loads(done.stdout)["nodes"]
    assert node["node"] == "gpu-9" and "unreadable" in node["why"]
