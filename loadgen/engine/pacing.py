"""When the next request may go to an endpoint.

Three things hold a request back: its endpoint is being watched after an outage
(until it answers readiness again), the endpoint asked for a back-off (Retry-After),
or the scenario's rate limit. The rate limit is asyncio-throttle behind one lock, so
one waiter polls it, not all of them.
"""

from __future__ import annotations

import asyncio
from fractions import Fraction

from asyncio_throttle import Throttler

MAX_BACK_OFF_S = 60.0


def _throttler(rate: float) -> Throttler | None:
    if rate <= 0:
        return None
    frac = Fraction(rate).limit_denominator(1000)
    # Spread the allowance: at most ~1/10 s worth of requests in one burst.
    burst = max(1, int(rate // 10))
    period = float(Fraction(burst) / frac)
    return Throttler(rate_limit=burst, period=period, retry_interval=min(0.01, period / 4))


class Pacer:
    def __init__(self, base_urls: list[str], rate_limit: float) -> None:
        self._open: dict[str, asyncio.Event] = {}
        for url in base_urls:
            event = asyncio.Event()
            event.set()
            self._open[url] = event
        self._paused_until: dict[str, float] = {}
        self._throttler = _throttler(rate_limit)
        self._throttle_lock = asyncio.Lock()

    async def wait(self, endpoint: str) -> None:
        """Return when a request may be sent to `endpoint`."""
        gate = self._open[endpoint]
        if not gate.is_set():
            await gate.wait()
        until = self._paused_until.get(endpoint)
        if until is not None:
            delay = until - asyncio.get_running_loop().time()
            if delay > 0:
                await asyncio.sleep(delay)
        if self._throttler is not None:
            async with self._throttle_lock, self._throttler:
                pass

    def back_off(self, endpoint: str, seconds: float) -> None:
        """The server asked for a pause (Retry-After); at most a minute is honoured."""
        loop = asyncio.get_running_loop()
        self._paused_until[endpoint] = loop.time() + min(seconds, MAX_BACK_OFF_S)

    def hold(self, endpoint: str) -> None:
        self._open[endpoint].clear()

    def release(self, endpoint: str) -> None:
        self._open[endpoint].set()
