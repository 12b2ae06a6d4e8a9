"""`docker compose` with the project's compose.yaml and the tier's CPU override.

The tier runs Compose as an operator would (`up --exit-code-from SERVICE SERVICE`, the
documented command), in a clean environment: only the daemon's client settings and
the variables the tier sets, so a DSV4_* in the caller's shell cannot change what is
tested. Stdlib only.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from docker_daemon import DockerDaemon

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
COMPOSE = REPO / "compose.yaml"
CPU_OVERRIDE = HERE / "compose.cpu.yaml"
SIM_COMPOSE = REPO / "compose.sim.yaml"
SIM_CPU_OVERRIDE = HERE / "compose.sim.cpu.yaml"
# compose.yaml's volume names (fixed, not prefixed with the project).
HF_CACHE_VOLUME = "dsv4-qual-hf-cache"
RESULTS_VOLUME = "dsv4-qual-results"
RECEIPTS_VOLUME = "dsv4-qual-receipts-candidate"
SIM_RECEIPTS_VOLUME = "dsv4-qual-receipts-sim"


@dataclass
class ComposeProject:
    daemon: DockerDaemon
    name: str
    variables: dict[str, str] = field(default_factory=dict)
    files: tuple[Path, ...] = (COMPOSE, CPU_OVERRIDE)

    def command(self, *args: str) -> list[str]:
        files = [item for path in self.files for item in ("-f", str(path))]
        return ["docker", "compose", "--project-directory", str(REPO), "-p", self.name,
                *files, *args]

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return self.daemon.env() | self.variables | dict(extra or {})

    def run(self, *args: str, timeout: float = 900, check: bool = True,
            extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.command(*args), env=self.env(extra_env),
                              capture_output=True, text=True, timeout=timeout, cwd=REPO)
        if check and done.returncode != 0:
            raise RuntimeError(f"docker compose {' '.join(args)} exited {done.returncode}:\n"
                               f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
        return done

    def up_gate(self, service: str, *, timeout: float = 900,
                extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """The documented gate command: `up --exit-code-from X X`; its exit code is X's."""
        return self.run("up", "--exit-code-from", service, service, timeout=timeout,
                        check=False, extra_env=extra_env)

    def start_gate(self, service: str, extra_env: Mapping[str, str] | None = None, *,
                   name_service: bool = True) -> subprocess.Popen[str]:
        """The same command, returning at once (for a test that acts while it runs);
        `name_service=False` leaves the service's name out after `up`, as an operator
        might (`up --exit-code-from X`)."""
        args = ["up", "--exit-code-from", service, *([service] if name_service else [])]
        return subprocess.Popen(
            self.command(*args), env=self.env(extra_env),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)

    def container_id(self, service: str) -> str:
        ids = self.run("ps", "-a", "-q", service, timeout=60).stdout.split()
        if len(ids) != 1:
            raise RuntimeError(f"{service}: expected one container, found {ids}")
        return ids[0]

    def inspect(self, service: str) -> dict[str, object]:
        out = self.daemon.docker("inspect", self.container_id(service), timeout=60).stdout
        return json.loads(out)[0]

    def main_pid(self, service: str) -> int:
        """The host pid of the service's main process (the container's pid 1)."""
        state = self.inspect(service)["State"]
        assert isinstance(state, dict)
        return int(state["Pid"])

    def logs(self, service: str) -> str:
        return self.run("logs", "--no-color", service, timeout=120, check=False).stdout

    def down(self) -> None:
        """Containers of every profile and the project's network away (a service started
        by name, e.g. the soak, has a profile that plain `down` would not cover); named
        volumes stay, as for an operator."""
        self.run("--profile", "*", "down", "--remove-orphans", "--timeout", "10",
                 timeout=300)


def volume_path(daemon: DockerDaemon, volume: str) -> Path:
    """Where a local volume's files are on this machine (the tier runs as root)."""
    return Path(daemon.docker("volume", "inspect", "--format", "{{.Mountpoint}}", volume,
                              timeout=60).stdout.strip())


def recreate_volume(daemon: DockerDaemon, volume: str) -> Path:
    """An empty volume of that name (a previous run's files would blur what this run did)."""
    daemon.docker("volume", "rm", "-f", volume, timeout=120)
    daemon.docker("volume", "create", volume, timeout=60)
    return volume_path(daemon, volume)


def ensure_volume(daemon: DockerDaemon, volume: str) -> Path:
    """The volume, created if missing (what an operator does once for external volumes)."""
    if daemon.docker("volume", "inspect", volume, check=False, timeout=60).returncode != 0:
        daemon.docker("volume", "create", volume, timeout=60)
    return volume_path(daemon, volume)


def results_dirs(daemon: DockerDaemon, volume: str, prefix: str) -> list[Path]:
    """Results directories in the volume whose name starts with `prefix`, oldest first."""
    root = volume_path(daemon, volume)
    return sorted((p for p in root.glob(f"{prefix}-*") if p.is_dir()),
                  key=lambda p: p.stat().st_mtime)


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str,
             interval_s: float = 0.5) -> None:
    """Poll `predicate` until it returns something true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise TimeoutError(f"{what}: not after {timeout_s:.0f} s")
