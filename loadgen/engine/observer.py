"""What the engine tells an observer while it sends, for live views outside the process.

The records file stays the account of record; an observer (the metrics endpoint of
`--metrics-port`) only mirrors it as it grows: a phase began, a reply got its own
verdicts, the number in flight changed. With `--workers` the parent reports the
workers' records as it reads them from the shared records file, so an observer in the
parent sees every process's requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class RunObserver(Protocol):
    """Called from the run's event loop; every call must be cheap and must not raise."""

    def phase_started(self, phase: str, planned: int) -> None:
        """A phase (`priming`, `measurement`, `reference`) begins with `planned` requests."""

    def request_done(self, phase: str, verdicts: Sequence[str]) -> None:
        """One request of `phase` was recorded with these verdicts (most severe first)."""

    def in_flight(self, count: int) -> None:
        """Requests in flight now (every process's, with `--workers`)."""
