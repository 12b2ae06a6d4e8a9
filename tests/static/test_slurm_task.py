"""fleet/slurm/soak-array.sbatch run as a plain bash script (no Slurm): its dry run, what
a server command of the user's own is given, and the image the rounds record.

Contract under test: `DSV4_DRY_RUN=1 bash fleet/slurm/soak-array.sbatch` prints what a
task would run with no database named (docs/fleet.md gives it as the first thing to
try); DSV4_SERVER_CMD is a shell command line in which the task's port, receipts
folder and node name expand, started in a process group of its own and stopped as one
when the task ends; a server of the user's own records the image as unknown unless
DSV4_SERVER_IMAGE names it (docs/cli.md, `soak`: unknown, never guessed).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from static_support import REPO

SOAK_ARRAY = REPO / "fleet" / "slurm" / "soak-array.sbatch"
#: Variables of the caller's shell that would change what the script does.
CLEARED = ("DSV4_HISTORY", "DSV4_SERVER_CMD", "DSV4_SERVER_IMAGE", "DSV4_QUAL",
           "DSV4_DRY_RUN", "DSV4_SOAK_ARGS", "DSV4_SHIP_TO", "DSV4_ROUNDS")


def run_task(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in CLEARED}
    return subprocess.run(["bash", str(SOAK_ARRAY)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={**base, "SLURMD_NODENAME": "node-a", "SLURM_ARRAY_TASK_ID": "2",
                               "DSV4_RESULTS": str(tmp_path / "results"), **env})


def sections(stdout: str) -> dict[str, list[str]]:
    parts: dict[str, list[str]] = {}
    current = ""
    for line in stdout.splitlines():
        if line.startswith("# "):
            current = line[2:]
            parts[current] = []
        else:
            parts[current].append(line)
    return parts


def test_the_dry_run_needs_no_database(tmp_path: Path) -> None:
    done = run_task(tmp_path, DSV4_DRY_RUN="1")
    assert done.returncode == 0, done.stderr
    soak = sections(done.stdout)["dsv4-qual"]
    assert soak[soak.index("--history") + 1] == "<DSV4_HISTORY>"
    assert "DSV4_HISTORY is not set" in done.stderr
    assert not (tmp_path / "results").exists(), "a dry run writes nothing"


def test_a_real_task_still_needs_the_database(tmp_path: Path) -> None:
    done = run_task(tmp_path, DSV4_SERVER_CMD="true", DSV4_QUAL="true")
    assert done.returncode != 0
    assert "set DSV4_HISTORY" in done.stderr


def test_the_image_the_rounds_record_is_the_one_that_runs_or_unknown(tmp_path: Path) -> None:
    def recorded(**env: str) -> str:
        done = run_task(tmp_path, DSV4_DRY_RUN="1", DSV4_HISTORY="sqlite.db", **env)
        assert done.returncode == 0, done.stderr
        return sections(done.stdout)["server image the rounds record"][0]

    assert recorded() == "dsv4-qual-server:latest", "the default server runs that image"
    assert recorded(DSV4_SERVER_IMAGE="registry/dsv4:v1") == "registry/dsv4:v1"
    assert recorded(DSV4_SERVER_CMD="dsv4-qual sim") == "unknown"
    assert recorded(DSV4_SERVER_CMD="my-server", DSV4_SERVER_IMAGE="registry/dsv4:v1") \
        == "registry/dsv4:v1"


def test_a_server_command_is_a_shell_line_with_the_tasks_values(tmp_path: Path) -> None:
    """Port, receipts folder and node expand in it; quoting works; the whole process
    group it started is stopped when the task ends."""
    seen = tmp_path / "seen.txt"
    pid_file = tmp_path / "child.pid"
    command = (f"echo \"$DSV4_SERVER_PORT|$DSV4_RECEIPTS|$DSV4_QUAL_HOST|a b\" > {seen}; "
               f"sleep 300 & echo $! > {pid_file}; wait")
    # The load generator's stand-in: waits for the server to have started, then ends.
    qual = tmp_path / "qual.sh"
    qual.write_text(f"for _ in $(seq 100); do [ -s {pid_file} ] && exit 0; sleep 0.1; done; "
                    "exit 9\n")
    done = run_task(tmp_path, DSV4_HISTORY="unused.sqlite", DSV4_SERVER_CMD=command,
                    DSV4_SERVER_PORT="18000", DSV4_PORT_STRIDE="10", DSV4_QUAL=f"bash {qual}")
    assert done.returncode == 0, done.stdout + done.stderr
    receipts = tmp_path / "results" / "node-a" / "receipts"
    assert seen.read_text().strip() == f"18020|{receipts}|node-a|a b"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists(), "the server's own children outlived the task"
