"""The tier's daemon bookkeeping: a dockerd left behind by a killed session is stopped
before a new one starts on the same data root, and nothing else is (these run in every
default test run, without Docker); a daemon the tier stops leaves nothing behind
(marked `docker`).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from docker_daemon import mounts_below, start, stop_stale
from tier_requirements import missing_prerequisites, plugins_dir, unavailable


def _pid_file(data_root: Path) -> Path:
    return Path(f"{data_root}.dockerd.pid")


def _spawn(argv0: str, data_root: Path) -> subprocess.Popen[bytes]:
    """A stand-in process whose command line reads `argv0 ... --data-root DATA_ROOT`."""
    # This interpreter itself, not `python3` from PATH: a version-manager shim there would
    # exec the real interpreter and lose the argv0 the test gives.
    script = (f'exec -a {argv0} {shlex.quote(sys.executable)} -c "import time; time.sleep(60)"'
              f' --data-root {data_root}')
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


@pytest.mark.docker
def test_a_daemon_started_and_stopped_leaves_nothing_behind(tmp_path: Path) -> None:
    """Stopped by its pid: no dockerd, no containerd, no mount, no socket folder left
    (dockerd leaves its network namespace mounted in the exec root)."""
    problems = missing_prerequisites(plugins_dir())
    if problems:
        unavailable("; ".join(problems))
    daemon = start(tmp_path / "data-root", plugins_dir(), tmp_path / "dockerd.log")
    containerd = Path(daemon.exec_root / "containerd" / "containerd.pid").read_text().strip()
    assert daemon.docker("info", "--format", "{{.Driver}}").stdout.strip()
    # A container on the host network, as the stand-in build runs one: dockerd then
    # mounts the host's network namespace in its exec root (the image is empty; the
    # container need not start for that).
    empty = tmp_path / "empty"
    empty.mkdir()
    tar = subprocess.Popen(["tar", "-C", str(empty), "-c", "."], stdout=subprocess.PIPE)
    daemon.docker("import", "-", "dsv4q-probe:empty", input_file=tar.stdout)
    tar.wait(timeout=30)
    daemon.docker("run", "--network", "host", "dsv4q-probe:empty", "/none", check=False)
    mounted = mounts_below(daemon.exec_root)
    daemon.stop()
    assert daemon.proc.poll() is not None
    assert not Path(f"/proc/{containerd}").exists() or _zombie(int(containerd))
    assert mounted, "nothing was mounted: the check below would prove nothing"
    assert not mounts_below(daemon.exec_root)
    assert not daemon.exec_root.exists()
    assert not Path(f"{tmp_path / 'data-root'}.dockerd.pid").exists()


def _zombie(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
