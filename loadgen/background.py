"""Background tasks of a run (the /metrics scraper, the event-loop lag sampler).

They run for as long as the run does and are stopped from outside: cancelling one and
waiting for it must neither raise nor leave it running into the reports.
"""

from __future__ import annotations

import asyncio
import contextlib


async def cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel `task` (None: nothing runs) and wait until it has ended."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
