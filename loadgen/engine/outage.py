"""A server that went away mid-run: hold its new requests, wait for it, or end the run.

A refused connection or a stream broken mid-reply says the server may be gone. The
requests already in flight fail as they do; new ones to that endpoint wait while
one probe asks whether it is still there. If it is, nothing happened. If not, it is
a restart: `load.on_server_restart = "invalid"` ends the run invalid at once;
`"continue"` waits (at most `restart_ready_timeout_s`) for readiness and goes on,
or ends the run invalid when it never comes back.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import httpx

from loadgen.engine.pacing import Pacer
from loadgen.engine.stopping import Stopper
from loadgen.exit_codes import RunInvalidError
from loadgen.records import RequestRecord
from loadgen.run_facts import RunFacts
from loadgen.scenario import LoadConfig
from loadgen.targets.readiness import probe, wait_ready

#: What changes how long a run waits for a server that went away.
RESTART_WAIT = "load.restart_ready_timeout_s, or --ready-timeout,"


class OutageWatch:
    def __init__(self, http: httpx.AsyncClient, pacer: Pacer, load: LoadConfig,
                 stopper: Stopper, facts: RunFacts,
                 say: Callable[[str], None] | None = None) -> None:
        """`say`: where the wait for a server that went away is told as it goes (the
        progress lines), so a restart wait of minutes is never silent."""
        self._say = say
        self._http = http
        self._pacer = pacer
        self._load = load
        self._stopper = stopper
        self._facts = facts
        self._checks: dict[str, asyncio.Task[None]] = {}

    def saw(self, record: RequestRecord) -> None:
        """Look at a finished record; start a check when it says the server may be gone."""
        if record.error_kind is None or not record.error_kind.server_gone:
            return
        endpoint = record.endpoint
        running = self._checks.get(endpoint)
        if running is not None and not running.done():
            return
        self._pacer.hold(endpoint)
        self._checks[endpoint] = asyncio.get_running_loop().create_task(self._check(endpoint))

    def then_stop(self, endpoint: str, message: str) -> bool:
        """Stop the run as invalid with `message` once the check of `endpoint` in progress
        has said its word (the server went away: its own reason comes first; it came back
        or never left: `message`). False when no check is in progress."""
        running = self._checks.get(endpoint)
        if running is None or running.done():
            return False

        def stop(_: asyncio.Task[None]) -> None:
            self._stopper.stop("invalid", message)

        running.add_done_callback(stop)
        return True

    async def _check(self, endpoint: str) -> None:
        if await probe(self._http, endpoint, timeout=5.0) is not None:
            self._pacer.release(endpoint)
            return
        self._facts.server_restarts += 1
        if self._load.on_server_restart == "invalid":
            self._stopper.stop("invalid", f"server {endpoint} went away during the run "
                               "(load.on_server_restart = 'invalid')")
            return
        if self._say is not None:
            self._say(f"server {endpoint} went away mid-run: its new requests wait until it "
                      f"is back (load.on_server_restart = 'continue')")
        try:
            # A name that stops resolving is a container on its way back, not a typo:
            # the restart wait keeps its whole limit.
            await wait_ready(self._http, endpoint, self._load.restart_ready_timeout_s,
                             say=self._say, dns_grace_s=math.inf,
                             how_to_wait=RESTART_WAIT)
        except RunInvalidError as exc:
            self._stopper.stop("invalid", f"server went away and did not come back: {exc}")
            return
        self._pacer.release(endpoint)

    def cancel(self) -> None:
        for task in self._checks.values():
            task.cancel()
