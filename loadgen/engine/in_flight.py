"""How many requests are in flight: what each record states when it is sent.

One process counts in a plain integer; with `--workers` every process counts in
one shared-memory integer, so a record states the run's total in flight, not its
process's share.
"""

from __future__ import annotations

from typing import Any


class InFlight:
    def __init__(self, shared: Any = None) -> None:
        self._shared = shared  # a multiprocessing.Value("i") across worker processes
        self._local = 0

    @property
    def local(self) -> int:
        """This process's requests in flight."""
        return self._local

    def enter(self) -> int:
        """One more in flight; the total in flight now, this one included."""
        self._local += 1
        shared = self._shared
        if shared is None:
            return self._local
        with shared.get_lock():
            shared.value += 1
            return int(shared.value)

    def leave(self) -> None:
        self._local -= 1
        shared = self._shared
        if shared is not None:
            with shared.get_lock():
                shared.value -= 1
