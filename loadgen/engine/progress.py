"""Live progress: a rich panel on a terminal, plain periodic lines everywhere else.

CI logs and `docker compose` capture stdout without a terminal; a live display there
would be thousands of escape codes, so the fallback prints one line every few seconds.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from loadgen.engine.stopping import StopReason

#: How a phase's last line ends: it ran to its end, or was cut short (the reason is
#: the run's to tell; the line only must not say "done" of a phase that was not).
ENDINGS = {None: "done", "interrupted": "interrupted", "invalid": "stopped"}


class Progress:
    """Counts of one phase, refreshed at most a few times a second."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False,
                 plain_interval_s: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live_mode = (not quiet) and self.stream.isatty()
        self.plain_interval_s = plain_interval_s
        self._live: Live | None = None
        self.phase = ""
        self.total = 0
        self.done = 0
        self.in_flight = 0
        self.tokens = 0
        self.verdicts: Counter[str] = Counter()
        self._t0 = time.monotonic()
        self._last_print = 0.0
        self._ending = ""

    def start_phase(self, phase: str, total: int) -> None:
        self.phase, self.total, self.done, self.tokens = phase, total, 0, 0
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

    def update(self, verdict: str, tokens: int) -> None:
        self.done += 1
        self.tokens += tokens
        self.verdicts[verdict] += 1
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
        print(text, file=self.stream, flush=True)

    def _render(self) -> Table:
        ending = f" ({self._ending})" if self._ending else ""
        table = Table(title=f"{self.phase}: {self.done}/{self.total}{ending}", expand=False)
        table.add_column("in flight", justify="right")
        table.add_column("tokens/s", justify="right")
        for name in sorted(self.verdicts):
            table.add_column(name, justify="right")
        table.add_row(str(self.in_flight), f"{self._rate():.0f}",
                      *(str(self.verdicts[n]) for n in sorted(self.verdicts)))
        return table
