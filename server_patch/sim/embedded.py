"""The load generator's `[target.sim]`: start the sim in-process, stop it after the run.

Found by the loadgen through the `dsv4_qual.targets` entry point, so the loadgen
never imports this package.
"""

from __future__ import annotations

from typing import Any

from server_patch.sim.config import SimConfig
from server_patch.sim.server import RunningSim, default_receipts_dir, start_in_thread


def start(**options: Any) -> RunningSim:
    receipts = options.pop("receipts_dir", None) or default_receipts_dir()
    cfg = SimConfig(receipts_dir=receipts, **options)
    return start_in_thread(cfg)
