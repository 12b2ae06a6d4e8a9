"""The tier's daemon bookkeeping, without Docker: a dockerd left behind by a killed
session is stopped before a new one starts on the same data root, and nothing else is.

Not marked `docker`: it runs in every default test run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from docker_daemon import stop_stale


def _pid_file(data_root: Path) -> Path:
    return Path(f"{data_root}.dockerd.pid")


def _spawn(argv0: str, data_root: Path) -> subprocess.Popen[bytes]:
    """A stand-in process whose command line reads `argv0 ... --data-root DATA_ROOT`."""
    script = f'exec -a {argv0} python3 -c "import time; time.sleep(60)" --data-root {data_root}'
    return subprocess.Popen(["bash", "-c", script])


def _cmdline_ready(proc: subprocess.Popen[bytes], argv0: str) -> None:
    for _ in range(100):
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        if cmdline.startswith(argv0.encode() + b"\0"):
            return
        subprocess.run(["sleep", "0.05"], check=True)
    pytest.fail(f"no process named {argv0}")


def test_a_dockerd_left_on_this_data_root_is_stopped(tmp_path: Path) -> None:
    data_root = tmp_path / "data-root"
    stale = _spawn("dockerd", data_root)
    try:
        _cmdline_ready(stale, "dockerd")
        _pid_file(data_root).write_text(f"{stale.pid}\n")
        assert stop_stale(data_root) == stale.pid
        assert stale.wait(timeout=10) != 0
        assert not _pid_file(data_root).exists()
    finally:
        stale.kill()


@pytest.mark.parametrize("argv0", ["sleeper", "dockerd"])
def test_any_other_process_is_left_alone(tmp_path: Path, argv0: str) -> None:
    """A reused pid, or a dockerd of another data root, is not ours to stop."""
    data_root = tmp_path / "data-root"
    other = _spawn(argv0, tmp_path / "another-data-root" if argv0 == "dockerd" else data_root)
    try:
        _cmdline_ready(other, argv0)
        _pid_file(data_root).write_text(f"{other.pid}\n")
        stop_stale(data_root)
        assert other.poll() is None, "a process that is not ours was signalled"
    finally:
        other.kill()
        other.wait(timeout=10)
