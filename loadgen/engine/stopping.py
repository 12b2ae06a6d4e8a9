"""Why a run stops early, and the one place that stops it.

Two things end a phase before its last request: an interrupt (SIGINT/SIGTERM: the
requests in flight are recorded as interrupted and the reports are still written)
and a finding that makes the run invalid (the server went away and did not come
back). Both cancel the task that is running the current step.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class StopReason:
    kind: Literal["interrupted", "invalid"]
    message: str


class Stopper:
    """Holds the first reason to stop and cancels the task it guards."""

    def __init__(self) -> None:
        self.reason: StopReason | None = None
        self._task: asyncio.Future[Any] | None = None

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    async def guarded(self, coro: Coroutine[Any, Any, T]) -> T | None:
        """Run `coro` as the task `stop` cancels (the readiness wait, a phase); None when
        it was stopped that way. A stop that came before it starts skips it."""
        if self.stopped:
            coro.close()
            return None
        task = asyncio.ensure_future(coro)
        self._task = task
        try:
            return await task
        except asyncio.CancelledError:
            if not self.stopped:
                raise
            return None
        finally:
            self._task = None

    def stop(self, kind: Literal["interrupted", "invalid"], message: str) -> None:
        if self.reason is None:
            self.reason = StopReason(kind, message)
            if self._task is not None:
                self._task.cancel()

    def interrupt(self, signame: str) -> None:
        self.stop("interrupted", f"interrupted by {signame}")

    def install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.interrupt, sig.name)

    def remove_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
