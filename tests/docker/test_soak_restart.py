"""The soak profile when its server crashes: Docker restarts the server, the soak
records the restart and goes on.

Contract under test (compose.yaml's soak service, `restart: on-failure`, the nightly
soak's `load.on_server_restart = "continue"`): the server's main process is killed
in the middle of a round; the round waits for the restarted server and finishes, the
history records the restart, the next round knows the server started anew, the soak
runs its remaining rounds, and `docker compose` returns the soak's own exit code.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest
import tier_timings
from compose_project import RESULTS_VOLUME, ComposeProject, volume_path, wait_for
from tier_scenarios import SOAK, SOAK_ROUNDS

pytestmark = [pytest.mark.docker, pytest.mark.timeout(2400)]

KILLED_ROUND = 2
RECORDS_BEFORE_KILL = 20


def _soak_dir(compose: ComposeProject) -> Path:
    return volume_path(compose.daemon, RESULTS_VOLUME) / f"soak-{SOAK.name}"


def _records_in_round(compose: ComposeProject, number: int) -> int:
    files = list(_soak_dir(compose).glob(f"*/round-{number:04d}/records.jsonl"))
    return len(files[0].read_text().splitlines()) if files else 0


def _rounds(compose: ComposeProject) -> list[dict[str, object]]:
    history = volume_path(compose.daemon, RESULTS_VOLUME) / "soak-history.sqlite"
    with sqlite3.connect(f"file:{history}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM rounds ORDER BY round").fetchall()
    return [dict(row) for row in rows]


def test_the_soak_records_a_server_restart_and_goes_on(compose: ComposeProject) -> None:
    assert not _soak_dir(compose).exists()
    env = {"DSV4_SOAK_SCENARIO": SOAK.container_path, "DSV4_SOAK_DURATION": "20m"}
    with tier_timings.stage(f"compose up, soak of {SOAK_ROUNDS} rounds, server killed"):
        soak = compose.start_gate("soak", extra_env=env)
        try:
            wait_for(lambda: _records_in_round(compose, 1) or soak.poll() is not None,
                     timeout_s=900, what="round 1's records")
            server_pid = compose.main_pid("server")  # looked up before: a round is short
            wait_for(lambda: _records_in_round(compose, KILLED_ROUND) >= RECORDS_BEFORE_KILL
                     or soak.poll() is not None, timeout_s=900, what="round 2's records",
                     interval_s=0.1)
            assert soak.poll() is None, "the soak ended before the server was killed"
            os.kill(server_pid, signal.SIGKILL)
            output, _ = soak.communicate(timeout=900)
        except BaseException:
            soak.kill()
            raise
    (summary_file,) = _soak_dir(compose).glob("*/soak.json")
    summary = json.loads(summary_file.read_text())
    assert soak.returncode == summary["exit_code"], output[-4000:]
    assert soak.returncode not in (130, 137), output[-4000:]
    assert summary["status"] == "finished"

    rounds = _rounds(compose)
    assert [r["round"] for r in rounds] == list(range(1, SOAK_ROUNDS + 1))
    assert all(r["status"] == "complete" for r in rounds), rounds
    killed = rounds[KILLED_ROUND - 1]
    assert killed["server_restarts"] >= 1, "the round saw the server go and come back"
    after = rounds[KILLED_ROUND]
    assert after["restart_detected"] == 1, "the next round knows the server is new"
    for later in rounds[KILLED_ROUND:]:
        assert later["exit_code"] == 0, later

    # docs/fleet.md's trend command reads the history where the soak wrote it: in the
    # results volume, through the soak service's own mount.
    trend = compose.run("run", "--rm", "--no-deps", "soak", "history",
                        "/results/soak-history.sqlite", timeout=300, check=False)
    assert trend.returncode == 0, trend.stdout[-2000:] + trend.stderr[-2000:]
    assert SOAK.name in trend.stdout, trend.stdout[-2000:]
