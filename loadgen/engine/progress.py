"""Live progress: a rich panel on a terminal, plain periodic lines everywhere else.

CI logs and `docker compose` capture stdout without a terminal; a live display there
would be thousands of escape codes, so the fallback prints one line every few seconds.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from loadgen.engine.observer import RunObserver
from loadgen.engine.stopping import StopReason

#: How a phase's last line ends: it ran to its end, or was cut short (the reason is
#: the run's to tell; the line only must not say "done" of a phase that was not).
ENDINGS = {None: "done", "interrupted": "interrupted", "invalid": "stopped"}


class Progress:
    """Counts of one phase, refreshed at most a few times a second; what it is told, it
    passes on to the run's observer (live metrics), if any."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False,
                 plain_interval_s: float = 5.0, observer: RunObserver | None = None,
                 side: str | None = None) -> None:
        self.stream = stream or sys.stderr
        #: Which side of a qualification this run is (`control`, `candidate`): every line
        #: starts with it, so two runs' lines in one log are never mistaken for each other.
        self.prefix = f"{side}: " if side else ""
        self.quiet = quiet
        self.live_mode = (not quiet) and self.stream.isatty()
        self.plain_interval_s = plain_interval_s
        self._live: Live | None = None
        self.phase = ""
        self.total = 0
        self.done = 0
        self.observer = observer
        self._in_flight = 0
        self.tokens = 0
        self.verdicts: Counter[str] = Counter()
        self._t0 = time.monotonic()
        self._last_print = 0.0
        self._ending = ""

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @in_flight.setter
    def in_flight(self, count: int) -> None:
        self._in_flight = count
        if self.observer is not None:
            self.observer.in_flight(count)

    def start_phase(self, phase: str, total: int) -> None:
        self.phase, self.total, self.done, self.tokens = phase, total, 0, 0
        if self.observer is not None:
            self.observer.phase_started(phase, total)
        self.verdicts = Counter()
        self._t0 = time.monotonic()
        self._last_print = 0.0
        self._ending = ""
        if self.live_mode and self._live is None:
            # rich calls _render on its own refresh tick: a record costs a counter bump.
            self._live = Live(get_renderable=self._render, console=Console(file=self.stream),
                              refresh_per_second=4, transient=False)
            self._live.start()
        elif not self.quiet and not self.live_mode:
            self._line(f"{phase}: {total} requests")

    def update(self, verdicts: Sequence[str], tokens: int) -> None:
        """One request recorded: its verdicts (most severe first) and completion tokens."""
        self.done += 1
        self.tokens += tokens
        self.verdicts[verdicts[0]] += 1
        if self.observer is not None:
            self.observer.request_done(self.phase, verdicts)
        if self._live is not None:
            return
        now = time.monotonic()
        if not self.quiet and now - self._last_print >= self.plain_interval_s:
            self._last_print = now
            self._line(self._summary_line())

    def end_phase(self, stop: StopReason | None = None) -> None:
        """The phase's last line: `(done)`, or `(interrupted)` / `(stopped)` when `stop`
        (the run's reason to stop) cut it short."""
        self._ending = ENDINGS[stop.kind if stop is not None else None]
        if self._live is not None:
            self._live.refresh()
        elif not self.quiet:
            self._line(self._summary_line() + f" ({self._ending})")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _rate(self) -> float:
        elapsed = time.monotonic() - self._t0
        return self.tokens / elapsed if elapsed > 0 else 0.0

    def _summary_line(self) -> str:
        counts = " ".join(f"{k}={v}" for k, v in sorted(self.verdicts.items()))
        return (f"{self.phase}: {self.done}/{self.total} done, {self.in_flight} in flight, "
                f"{self._rate():.0f} tok/s, {counts or 'no replies yet'}")

    def note(self, text: str) -> None:
        """A line about what the run is doing between phases (waiting for the server)."""
        if not self.quiet:
            self._line(text)

    def _line(self, text: str) -> None:
        print(self.prefix + text, file=self.stream, flush=True)

    def _render(self) -> Table:
        ending = f" ({self._ending})" if self._ending else ""
        table = Table(title=f"{self.prefix}{self.phase}: {self.done}/{self.total}{ending}",
                      expand=False)
        table.add_column("in flight", justify="right")
        table.add_column("tokens/s", justify="right")
        for name in sorted(self.verdicts):
            table.add_column(name, justify="right")
        table.add_row(str(self.in_flight), f"{self._rate():.0f}",
                      *(str(self.verdicts[n]) for n in sorted(self.verdicts)))
        return table
