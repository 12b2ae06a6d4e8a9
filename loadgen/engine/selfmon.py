"""The load generator watching itself: event-loop lag and CPU.

When the client is saturated, TTFT and inter-token gaps measure the client's queue,
not the server; the summary must say so instead of reporting them as the server's.
"""

from __future__ import annotations

import asyncio
import time

from loadgen.background import cancel
from loadgen.run_facts import ClientReport

# Beyond these the client's own scheduling distorts the timings it reports.
SATURATED_LAG_P99_S = 0.050
SATURATED_CPU_UTIL = 0.90


class SelfMonitor:
    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()

    def start(self) -> None:
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
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
        cpu = time.process_time() - self._cpu0
        wall = max(1e-9, time.monotonic() - self._wall0)
        lags = sorted(self.lags)

        def lag_s(q: float) -> float | None:
            return lags[min(len(lags) - 1, int(q * len(lags)))] if lags else None

        def pct(q: float) -> float | None:
            value = lag_s(q)
            return round(value * 1000, 3) if value is not None else None

        util = cpu / wall
        saturated = util >= SATURATED_CPU_UTIL or (lag_s(0.99) or 0.0) >= SATURATED_LAG_P99_S
        return ClientReport(
            cpu_s=round(cpu, 3),
            wall_s=round(wall, 3),
            cpu_util=round(util, 3),
            cpu_ms_per_request=round(cpu * 1000 / requests, 3) if requests else None,
            loop_lag_ms_p50=pct(0.50),
            loop_lag_ms_p99=pct(0.99),
            loop_lag_ms_max=round(lags[-1] * 1000, 3) if lags else None,
            saturated=saturated,
        )
