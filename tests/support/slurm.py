"""A throwaway Slurm cluster on this machine: munged, slurmctld and one slurmd per node.

Debian's slurm-wlm runs several slurmd on one host (`slurmd -N NAME`, each its own
port), so the cluster has real, distinct nodes (`n1`..`n4`): an array task's
SLURMD_NODENAME is the node Slurm placed it on, as on a rack. Everything lives in a
temp folder of its own (configuration, state, spool, logs, munge's key and socket);
the daemons are stopped by pid. Without the binaries the tests skip, except where
DSV4_QUAL_REQUIRE_SLURM=1 or CI is set (`.ci/slurm-tools.sh` installs them), where
they fail: a skipped tier would pass every change to the Slurm recipes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REQUIRE_ENV = "DSV4_QUAL_REQUIRE_SLURM"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol")
_SHARED_TEMP = tempfile.gettempdir()


def require_binaries() -> None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        reason = (f"Slurm is not installed ({', '.join(missing)} missing): "
                  "bash .ci/slurm-tools.sh")
        if os.environ.get(REQUIRE_ENV) == "1" or os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root (SlurmUser=root)")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SlurmCluster:
    """`start()`: munge, the controller, then the nodes; `stop()` by pid, folder removed."""

    def __init__(self, nodes: int = 4, cpus: int | None = None) -> None:
        require_binaries()
        self.root = Path(tempfile.mkdtemp(prefix="dsv4-slurm-", dir=_SHARED_TEMP))
        self.root.chmod(0o755)  # munge wants its socket's folders open to all
        self.nodes = [f"n{i + 1}" for i in range(nodes)]
        self.cpus = cpus or os.cpu_count() or 1
        self.host = socket.gethostname().split(".")[0]
        self.procs: list[subprocess.Popen[bytes]] = []
        self.conf = self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client command (sbatch, sinfo) needs to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _write(self, ctld_port: int, node_ports: list[int]) -> None:
        for folder in ("munge", "state", "spool", "log"):
            (self.root / folder).mkdir()
        (self.root / "munge").chmod(0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        r = self.root
        lines = [
            "ClusterName=dsv4ci", f"SlurmctldHost={self.host}", "SlurmUser=root",
            "SlurmdUser=root", f"SlurmctldPort={ctld_port}", "AuthType=auth/munge",
            f"AuthInfo=socket={r}/munge/munge.sock", "CredType=cred/munge",
            f"StateSaveLocation={r}/state", f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldPidFile={r}/slurmctld.pid", f"SlurmdPidFile={r}/slurmd-%n.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log", f"SlurmdLogFile={r}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "ReturnToService=2", "MpiDefault=none", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "SlurmctldDebug=info",
            "SlurmdDebug=info", "KillWait=5", "InactiveLimit=0",
        ]
        lines += [f"NodeName={name} NodeHostname={self.host} NodeAddr=127.0.0.1 "
                  f"Port={port} CPUs={self.cpus} State=UNKNOWN"
                  for name, port in zip(self.nodes, node_ports, strict=True)]
        lines.append("PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")

    def _daemon(self, *args: str) -> None:
        log = open(self.root / "log" / "daemons.out", "ab")  # noqa: SIM115 - the daemon's
        self.procs.append(subprocess.Popen(list(args), stdout=log, stderr=subprocess.STDOUT,
                                           env=self.env, cwd=self.root))
        log.close()

    def start(self, timeout: float = 60.0) -> SlurmCluster:
        ports = _free_ports(1 + len(self.nodes))
        self._write(ports[0], ports[1:])
        r = self.root
        self._daemon("munged", "--foreground", "--force", f"--socket={r}/munge/munge.sock",
                     f"--key-file={r}/munge/munge.key", f"--log-file={r}/log/munged.log",
                     f"--pid-file={r}/munge/munged.pid", f"--seed-file={r}/munge/seed")
        self._wait(lambda: (r / "munge" / "munge.sock").exists(), timeout, "munged")
        self._daemon("slurmctld", "-D", "-c", "-f", str(self.conf))
        for name in self.nodes:
            self._daemon("slurmd", "-D", "-N", name, "-f", str(self.conf))
        self._wait(self._all_idle, timeout, "the nodes did not come up idle")
        return self

    def _all_idle(self) -> bool:
        done = subprocess.run(["sinfo", "--noheader", "--Node", "--format", "%N %t"],
                              env=self.env, capture_output=True, text=True)
        states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
        return done.returncode == 0 and all(states.get(n) == "idle" for n in self.nodes)

    def _wait(self, ready: object, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():  # type: ignore[operator]
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"Slurm test cluster: {what}\n{self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)
