"""The Slurm recipe for real: a controller, four nodes, a soak array and its verdict.

`fleet/slurm/submit.sh` queues `soak-array.sbatch` (one task a node, exclusive) and
`verdict.sbatch` after it, against a real Slurm (tests.support.slurm) and one
throwaway PostgreSQL every node writes its rounds to. Each task's server is the
embedded sim (tests/fleet/sim_server.py) where the fleet runs the patched vLLM image;
the load generator is this checkout's `dsv4-qual`. All healthy: the verdict job exits
0 with every node passed. One node's server killed mid-round: it exits 1 and names
that node, the others passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen.conftest import REPO
from tests.support.postgres import Cluster
from tests.support.slurm import SlurmCluster

pytestmark = pytest.mark.slurm

SUBMIT = REPO / "fleet" / "slurm" / "submit.sh"
NODES = ["n1", "n2", "n3", "n4"]
SIM_SMOKE = (REPO / "scenarios" / "sim-smoke.toml").read_text()


def scenario_text() -> str:
    """sim-smoke, short, pointed at whatever server the task starts; a server that goes
    away is waited for 5 s, not an hour."""
    text = SIM_SMOKE.split("[target.sim]")[0] + "[target]\nready_timeout_s = 180\n\n[load]" \
        + SIM_SMOKE.split("[load]")[1]
    for old, new in (("measurement = 64", "measurement = 16"), ("priming = 16", "priming = 4"),
                     ("concurrency = 16", "concurrency = 4"),
                     ("prove_below = 0.05", "prove_below = 0.9"),
                     ("total_timeout_s = 120", "total_timeout_s = 120\n"
                      'on_server_restart = "continue"\nrestart_ready_timeout_s = 5')):
        assert old in text, old
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    cluster = SlurmCluster(nodes=len(NODES)).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
    cluster = Cluster().start()
    try:
        yield cluster
    finally:
        cluster.remove()


def submit(slurm: SlurmCluster, postgres: Cluster | None, work: Path,
           kill_node: str | None = None, ship_to: Path | None = None
           ) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The array and its verdict; the history in a new PostgreSQL database, or (None)
    in one SQLite file on the shared folder (docs/fleet.md's one-machine try)."""
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    scenario = work / "fleet-ci.toml"
    scenario.write_text(scenario_text())
    results = work / "results"
    env = {**slurm.env,
           "DSV4_HISTORY": (postgres.new_database(f"fleet_{uuid.uuid4().hex[:12]}")
                            if postgres else str(work / "history.sqlite")),
           "DSV4_SCENARIO": str(scenario), "DSV4_ROUNDS": "1", "DSV4_RESULTS": str(results),
           "DSV4_PORT_STRIDE": "1", "DSV4_SERVER_PORT": str(18000 + os.getpid() % 1000 * 8),
           "DSV4_METRICS_PORT": str(28000 + os.getpid() % 1000 * 8),
           # Single-quoted as a user would: the task expands its own port and folder.
           "DSV4_SERVER_CMD": f"{sys.executable} {REPO / 'tests' / 'fleet' / 'sim_server.py'}"
                              ' "$DSV4_SERVER_PORT" "$DSV4_RECEIPTS"',
           "DSV4_SERVER_IMAGE": "",
           "DSV4_QUAL": f"{sys.executable} -m loadgen", "DSV4_WAIT": "1",
           "PYTHONPATH": str(REPO), "DSV4_TEST_KILL_NODE": kill_node or "",
           "DSV4_SHIP_TO": str(ship_to or "")}
    done = subprocess.run(["bash", str(SUBMIT), "--gres=none", "--time=00:10:00"],
                          env=env, cwd=work, capture_output=True, text=True, timeout=900)
    return done, results


def explain(done: subprocess.CompletedProcess[str], results: Path, slurm: SlurmCluster) -> str:
    outs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2500:]}"
                     for p in sorted(results.glob("*.out")))
    return f"{done.stdout}\n{done.stderr}\n{outs}\n{slurm.logs()[-4000:]}"


@pytest.mark.parametrize("history", ["postgresql", "sqlite"])
def test_a_healthy_fleet_passes(slurm: SlurmCluster, postgres: Cluster, history: str,
                                tmp_path: Path) -> None:
    shipped = tmp_path / "shipped"
    done, results = submit(slurm, postgres if history == "postgresql" else None,
                           tmp_path / "healthy", ship_to=shipped)
    assert done.returncode == 0, explain(done, results, slurm)
    verdict = json.loads((results / "fleet.json").read_text())
    assert {n["node"]: n["state"] for n in verdict["nodes"]} == dict.fromkeys(NODES, "passed")
    # Each node's round was its own: run on that node, against that node's server.
    for node in verdict["nodes"]:
        assert Path(node["round"]["results_dir"]).is_relative_to(results / node["node"])
        # The server was a command of the user's own, no image named: unknown, not guessed.
        assert node["round"]["image"] is None, node["round"]
    suite = ET.parse(results / "fleet.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("4", "0")
    # DSV4_SHIP_TO: each node's round copied under the node's own name.
    for node in NODES:
        assert list((shipped / node).glob("*/round-0001/summary.json")), node


def test_a_node_whose_server_dies_fails_the_fleet_by_name(slurm: SlurmCluster,
                                                          postgres: Cluster,
                                                          tmp_path: Path) -> None:
    done, results = submit(slurm, postgres, tmp_path / "broken", kill_node="n3")
    assert done.returncode == 1, explain(done, results, slurm)
    verdict = json.loads((results / "fleet.json").read_text())
    states = {n["node"]: n for n in verdict["nodes"]}
    assert [n for n, v in states.items() if not v["passed"]] == ["n3"], verdict
    assert states["n3"]["state"] in ("invalid", "partial"), states["n3"]
    assert "went away" in states["n3"]["why"], states["n3"]
    assert "FLEET FAILED: 1 of 4 node(s) did not pass: n3" in verdict["statement"]
    markdown = (results / "fleet.md").read_text()
    assert "| n3 | INVALID |" in markdown or "| n3 | PARTIAL |" in markdown
