"""SIGTERM between runs: the same as Ctrl-C, so partial results are still reported.

A run handles SIGINT/SIGTERM itself while its event loop runs; when the loop closes,
asyncio resets SIGTERM to the default action (die at once). Commands that chain
runs (qualify, soak) re-arm this handler after each run, so a `docker stop` or a CI
timeout between two runs still ends in their bookkeeping and exit code 130.
"""

from __future__ import annotations

import signal
from types import FrameType


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"interrupted by {signal.Signals(signum).name}")


def sigterm_interrupts() -> None:
    """From now on SIGTERM raises KeyboardInterrupt (call again after each run)."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
