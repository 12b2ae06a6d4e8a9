"""The load generator's `[target.sim]`: start the sim in-process, stop it after the run.

Found by the loadgen through the `dsv4_qual.targets` entry point, so the loadgen
never imports this package.

A run that names no receipts folder gets one the sim makes in the temp dir; whoever
makes a temp folder removes it, so `close` does, once the run has copied the receipts
it needs into its own results (server.json keeps them whole).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from typing import Any

from server_patch.sim.config import SimConfig
from server_patch.sim.server import RunningSim, default_receipts_dir, start_in_thread

#: Where a quiet run's sim sends its log (the stride guard's finding included): nowhere.
#: What the guard saw is still in the receipt, and so in every report of the run.
QUIET_LOGGER = "server_patch.sim.quiet"


def quiet_logger() -> logging.Logger:
    """A logger that writes nothing, for a run asked to print only its results."""
    log = logging.getLogger(QUIET_LOGGER)
    log.propagate = False
    if not log.handlers:
        log.addHandler(logging.NullHandler())
    return log


@dataclass
class EmbeddedSim:
    """The sim a run started, and the receipts folder it made for itself (if any)."""

    running: RunningSim
    own_receipts_dir: str | None = None

    @property
    def base_url(self) -> str:
        return self.running.base_url

    @property
    def receipts_dir(self) -> str | None:
        return self.running.receipts_dir

    def stop(self) -> None:
        """Stop serving; the receipts stay readable (the guard's last counts flushed)."""
        self.running.stop()

    def close(self) -> None:
        """Stop serving and remove the receipts folder this sim made in the temp dir."""
        self.stop()
        if self.own_receipts_dir is not None:
            shutil.rmtree(self.own_receipts_dir, ignore_errors=True)
            self.own_receipts_dir = None


def start(**options: Any) -> EmbeddedSim:
    """Start the sim from a scenario's [target.sim] options; `quiet`: its log (the
    stride guard's line) writes nothing, as the run prints nothing but its results."""
    quiet = bool(options.pop("quiet", False))
    options.pop("reproduces", None)  # which side plays which bug: the scenario's business
    receipts = options.pop("receipts_dir", None)
    own = None if receipts else default_receipts_dir()
    try:
        running = start_in_thread(SimConfig(receipts_dir=receipts or own, **options),
                                  log=quiet_logger() if quiet else None)
    except BaseException:
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)
        raise
    return EmbeddedSim(running, own)
