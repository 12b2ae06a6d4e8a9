"""SIGINT/SIGTERM outside a run's event loop: while reports are written, and between runs.

A run handles SIGINT/SIGTERM itself while its event loop runs (the requests in flight
are recorded as interrupted). Outside it:

- Once a run has finished, a signal must not leave half of its reports behind, nor
  make the process exit with another code than the one it printed: `hold()` records
  signals from then on instead of raising, and the command exits normally.
- A command that goes on to another run (qualify's candidate, the next soak round)
  first calls `resume()`: SIGINT and SIGTERM raise KeyboardInterrupt again (SIGTERM
  too, so a `docker stop` or a CI timeout ends in the command's bookkeeping and exit
  code 130), and a signal held meanwhile is raised at once.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"interrupted by {signal.Signals(signum).name}")


class _Held:
    signal: str | None = None


HELD = _Held()


def _record(signum: int, frame: FrameType | None) -> None:
    HELD.signal = HELD.signal or signal.Signals(signum).name


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def hold() -> None:
    """From now on SIGINT/SIGTERM are recorded in `HELD.signal`, not raised."""
    if _main_thread():
        signal.signal(signal.SIGINT, _record)
        signal.signal(signal.SIGTERM, _record)


def resume() -> None:
    """SIGINT/SIGTERM raise KeyboardInterrupt again; a signal held meanwhile, at once."""
    if _main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _raise_interrupt)
    held, HELD.signal = HELD.signal, None
    if held:
        raise KeyboardInterrupt(f"interrupted by {held}")
