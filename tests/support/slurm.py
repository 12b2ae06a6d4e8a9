"""A throwaway Slurm cluster on this machine: fleet/slurm/one-machine.sh (munged,
slurmctld and one slurmd per node).

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
import subprocess
import tempfile
from pathlib import Path

import pytest

REQUIRE_ENV = "DSV4_QUAL_REQUIRE_SLURM"
ONE_MACHINE = Path(__file__).resolve().parents[2] / "fleet" / "slurm" / "one-machine.sh"
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


class SlurmCluster:
    """`start()`: fleet/slurm/one-machine.sh's cluster (munge, the controller, then the
    nodes) in a temp folder; `stop()`: the script stops it by pid and removes the folder.
    The tests run on the very cluster docs/fleet.md gives a user to try the recipe on."""

    def __init__(self, nodes: int = 4) -> None:
        require_binaries()
        self.root = Path(tempfile.mkdtemp(prefix="dsv4-slurm-", dir=_SHARED_TEMP)) / "cluster"
        self.nodes = [f"n{i + 1}" for i in range(nodes)]
        self.conf = self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client command (sbatch, sinfo) needs to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 120.0) -> SlurmCluster:
        done = subprocess.run(["bash", str(ONE_MACHINE), "start", str(self.root),
                               str(len(self.nodes))],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"Slurm test cluster: {ONE_MACHINE.name} start exited "
                               f"{done.returncode}:\n{done.stderr[-6000:]}")
        assert done.stdout.strip() == f"export SLURM_CONF={self.conf}", done.stdout
        return self

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        if (self.root / "pids").is_file():
            subprocess.run(["bash", str(ONE_MACHINE), "stop", str(self.root)],
                           capture_output=True, text=True, timeout=120)
        shutil.rmtree(self.root.parent, ignore_errors=True)
