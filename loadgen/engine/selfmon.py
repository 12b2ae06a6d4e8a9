"""The load generator watching itself: event-loop lag, its own CPU, and the time its
event loop waited for a CPU the host gave to other processes.

When the client is saturated, TTFT and inter-token gaps measure the client's queue,
not the server; the summary must say so instead of reporting them as the server's,
and say why: the client's own work (its CPU, or a blocking call on its loop), or a
busy host (the loop was ready to run and other processes held the CPUs). The two
want different fixes: fewer in flight or worker processes, or a quieter machine.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from loadgen.background import cancel
from loadgen.run_facts import ClientReport

# Beyond these the client's own scheduling distorts the timings it reports.
SATURATED_LAG_P99_S = 0.050
SATURATED_CPU_UTIL = 0.90
#: A loop that waited at least this share of the run for a CPU (run-queue wait) while
#: it lagged was held up by the host, not by its own work.
HOST_WAIT_SHARE = 0.05
#: Where the kernel can't say how long the loop waited for a CPU, a lagging loop that
#: used less than this share of one was not busy itself: the host was.
IDLE_CPU_UTIL = 0.25
#: Linux's per-thread scheduler statistics: time on a CPU, time waiting for one (ns).
SCHEDSTAT = Path("/proc/thread-self/schedstat")

CLIENT = "client"
HOST = "host"


def runqueue_wait_s() -> float | None:
    """How long the calling thread (the event loop's) has waited, runnable, for a CPU;
    None where the kernel does not say."""
    try:
        return int(SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def saturation_cause(cpu_util: float, lag_p99_s: float | None,
                     wait_share: float | None) -> str | None:
    """None (not saturated), `client` (its own CPU or its own blocking work) or `host`
    (the loop lagged while waiting for CPUs other processes held)."""
    if cpu_util >= SATURATED_CPU_UTIL:
        return CLIENT
    if (lag_p99_s or 0.0) < SATURATED_LAG_P99_S:
        return None
    if wait_share is not None:
        return HOST if wait_share >= HOST_WAIT_SHARE else CLIENT
    return HOST if cpu_util < IDLE_CPU_UTIL else CLIENT


class SelfMonitor:
    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
        self._wait0: float | None = None

    def start(self) -> None:
        """Called on the event loop's thread: its run-queue wait is the one measured."""
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
        self._wait0 = runqueue_wait_s()
        self._task = asyncio.get_running_loop().create_task(self._sample())

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.lags.append(max(0.0, loop.time() - expected))
            if len(self.lags) > 100_000:  # a week-long soak keeps a bounded sample
                del self.lags[::2]

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None

    def report(self, requests: int) -> ClientReport:
        """Called on the event loop's thread, as `start` was."""
        cpu = time.process_time() - self._cpu0
        wall = max(1e-9, time.monotonic() - self._wall0)
        lags = sorted(self.lags)
        wait_now = runqueue_wait_s()
        wait_share = (None if wait_now is None or self._wait0 is None
                      else max(0.0, wait_now - self._wait0) / wall)

        def lag_s(q: float) -> float | None:
            return lags[min(len(lags) - 1, int(q * len(lags)))] if lags else None

        def pct(q: float) -> float | None:
            value = lag_s(q)
            return round(value * 1000, 3) if value is not None else None

        util = cpu / wall
        cause = saturation_cause(util, lag_s(0.99), wait_share)
        return ClientReport(
            cpu_s=round(cpu, 3),
            wall_s=round(wall, 3),
            cpu_util=round(util, 3),
            cpu_ms_per_request=round(cpu * 1000 / requests, 3) if requests else None,
            loop_lag_ms_p50=pct(0.50),
            loop_lag_ms_p99=pct(0.99),
            loop_lag_ms_max=round(lags[-1] * 1000, 3) if lags else None,
            saturated=cause is not None,
            saturation=cause,
            cpu_wait_share=round(wait_share, 3) if wait_share is not None else None,
        )
