"""A Docker daemon of the tier's own: started here, talked to through its own socket,
stopped by its pid.

Why not the machine's daemon: CI machines have none (Debian's docker.io installs one
but nothing starts it), and a test must not touch images or volumes of anyone else.
So `dockerd` runs with its own data root (cached between runs: the stand-in base
images live there), its own exec root (socket, pid file, containerd state; a short
path, because unix socket paths are limited to ~100 bytes), no iptables rules (the
machine's firewall stays as it is) and no default bridge (Compose makes its own
networks). One tier session at a time per data root: a lock file says so.

Stdlib only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

STOP_GRACE_S = 60.0


class DaemonFailed(RuntimeError):
    """dockerd exited or never answered; the message carries its log's tail."""


@dataclass
class DockerDaemon:
    proc: subprocess.Popen[bytes]
    data_root: Path
    exec_root: Path
    config_dir: Path
    log_path: Path
    lock: IO[str]

    @property
    def socket(self) -> Path:
        return self.exec_root / "docker.sock"

    def env(self) -> dict[str, str]:
        """What a docker / docker compose client needs to reach this daemon and nothing else.

        DOCKER_BUILDKIT=0: the classic builder uses local base images as they are (no
        registry lookup, no frontend image); BuildKit would try to fetch both.
        """
        return {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "DOCKER_HOST": f"unix://{self.socket}",
            "DOCKER_CONFIG": str(self.config_dir),
            "DOCKER_BUILDKIT": "0",
        }

    def docker(self, *args: str, timeout: float = 600, check: bool = True,
               input_file: IO[bytes] | None = None) -> subprocess.CompletedProcess[str]:
        """Run the docker CLI against this daemon; output captured as text."""
        done = subprocess.run(
            ["docker", *args], env=self.env(), stdin=input_file, capture_output=True,
            text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} exited {done.returncode}:\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        return done

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM dockerd by its pid (it stops its containers and its containerd),
        then SIGKILL what is left, containerd included, by their pids."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STOP_GRACE_S)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        containerd = _read_pid(self.exec_root / "containerd" / "containerd.pid")
        if containerd is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(containerd, signal.SIGKILL)
        _unmount_below(self.exec_root)
        shutil.rmtree(self.exec_root, ignore_errors=True)
        _pid_file(self.data_root).unlink(missing_ok=True)
        self.lock.close()


def mounts_below(folder: Path) -> list[str]:
    """Mount points inside `folder` (dockerd leaves its network namespace mounted)."""
    prefix = str(folder).rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefix):
            points.append(point)
    return points


def _unmount_below(folder: Path) -> None:
    for point in sorted(mounts_below(folder), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=60)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for its parent to collect it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _pid_file(data_root: Path) -> Path:
    """Where the pid of the dockerd serving `data_root` is kept while it runs."""
    return Path(f"{data_root}.dockerd.pid")


def stop_stale(data_root: Path) -> int | None:
    """Stop a dockerd that an earlier session started on this data root and could not
    stop (the session was killed): two daemons on one data root corrupt it. Only a
    process whose command line is dockerd with this data root is signalled."""
    pid = _read_pid(_pid_file(data_root))
    if pid is None:
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        argv = []
    if argv[:1] == [b"dockerd"] and str(data_root).encode() in argv:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            while _running(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    _pid_file(data_root).unlink(missing_ok=True)
    return pid


def dockerd_command(data_root: Path, exec_root: Path) -> list[str]:
    return [
        "dockerd",
        "--data-root", str(data_root),
        "--exec-root", str(exec_root),
        "--pidfile", str(exec_root / "docker.pid"),
        "-H", f"unix://{exec_root / 'docker.sock'}",
        "--iptables=false",
        "--ip6tables=false",
        "--bridge=none",
    ]


def _config_dir(exec_root: Path, plugins: Path) -> Path:
    """A DOCKER_CONFIG whose cli-plugins are Compose v2 and buildx (and no credentials)."""
    config = exec_root / "config"
    config.mkdir()
    (config / "cli-plugins").symlink_to(plugins)
    return config


def start(data_root: Path, plugins: Path, log_path: Path, *,
          ready_timeout_s: float = 120.0) -> DockerDaemon:
    """Start dockerd and wait until it answers; raises DaemonFailed with its log."""
    data_root.mkdir(parents=True, exist_ok=True)
    lock = open(f"{data_root}.lock", "w")  # noqa: SIM115 - held for the daemon's life
    fcntl.flock(lock, fcntl.LOCK_EX)
    stop_stale(data_root)
    exec_root = Path(tempfile.mkdtemp(prefix="dsv4q-docker-"))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(dockerd_command(data_root, exec_root), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _pid_file(data_root).write_text(f"{proc.pid}\n")
    daemon = DockerDaemon(proc=proc, data_root=data_root, exec_root=exec_root,
                          config_dir=_config_dir(exec_root, plugins), log_path=log_path,
                          lock=lock)
    try:
        _wait_ready(daemon, ready_timeout_s)
    except BaseException:
        daemon.stop()
        raise
    return daemon


def _wait_ready(daemon: DockerDaemon, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon.proc.poll() is not None:
            raise DaemonFailed(f"dockerd exited with {daemon.proc.returncode}; log "
                               f"{daemon.log_path}:\n{daemon.log_tail()}")
        if daemon.socket.exists() and daemon.docker(
                "version", "--format", "{{.Server.Version}}", check=False,
                timeout=30).returncode == 0:
            return
        time.sleep(0.5)
    raise DaemonFailed(f"dockerd not answering after {timeout_s:.0f} s; log "
                       f"{daemon.log_path}:\n{daemon.log_tail()}")


def missing_tools(tools: Sequence[str] = ("dockerd", "docker", "debootstrap")) -> list[str]:
    return [tool for tool in tools if shutil.which(tool) is None]
