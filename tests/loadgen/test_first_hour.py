"""What a new user sees in the first hour: each friction found trying the README, fixed."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from loadgen.exit_codes import RunInvalidError
from loadgen.targets.readiness import wait_ready
from tests.loadgen.conftest import REPO, run_cli

SMOKE = str(REPO / "scenarios" / "smoke.toml")


def test_waiting_for_the_server_says_what_it_waits_for_and_beats() -> None:
    said: list[str] = []

    async def wait() -> None:
        async with httpx.AsyncClient() as http:
            await wait_ready(http, "http://127.0.0.1:1", 0.6, interval_s=0.05,
                             say=said.append, heartbeat_s=0.2)

    with pytest.raises(RunInvalidError, match=r"not ready after 0\.6 s"):
        asyncio.run(wait())
    assert said[0] == ("waiting for http://127.0.0.1:1 to be ready (GET /health and "
                       "/v1/models), up to 0.6 s")
    assert any(line.startswith("still waiting for http://127.0.0.1:1: ") for line in said)


def test_ready_timeout_on_the_command_line(tmp_path: Path) -> None:
    start = time.monotonic()
    proc = run_cli("run", SMOKE, "--base-url", "http://127.0.0.1:1", "--ready-timeout", "1",
                   "--out", str(tmp_path / "o"))
    assert time.monotonic() - start < 30
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith("waiting for http://127.0.0.1:1 to be ready")
    assert "up to 1 s" in proc.stderr
    assert "not ready after 1 s" in proc.stdout
    assert "are needed to prove" not in proc.stdout  # only the reason the run stopped
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["run"]["invalid"].startswith("server http://127.0.0.1:1 not ready")


@pytest.mark.parametrize("args,words", [
    (["--measurement", "0"], "load.measurement"),
    (["--ready-timeout", "0"], "target.ready_timeout_s"),
])
def test_nothing_is_sent_or_created_for_bad_input(tmp_path: Path, args, words) -> None:
    proc = run_cli("run", SMOKE, "--base-url", "http://127.0.0.1:1", *args)
    assert proc.returncode == 3 and words in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists()  # the cwd: no results folder appeared


def test_no_target_leaves_no_results_folder(tmp_path: Path) -> None:
    proc = run_cli("run", SMOKE)
    assert proc.returncode == 3 and "no target" in proc.stderr
    assert not (tmp_path / "results").exists()
