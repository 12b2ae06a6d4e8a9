"""What one engine process holds while it sends, for the parent and a shard worker alike.

The HTTP client (its pool sized to the concurrency), the streaming chat client,
records.jsonl (appended and flushed per record), pacing, the outage watch, the stop
signal with its SIGINT/SIGTERM handlers, the in-flight count, progress and the
client's self-monitoring. Opened and closed in one place, so both roles set up and
tear down alike.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import TracebackType

from loadgen.engine.client import ChatClient, Timeouts
from loadgen.engine.in_flight import InFlight
from loadgen.engine.outage import OutageWatch
from loadgen.engine.pacing import Pacer
from loadgen.engine.progress import Progress
from loadgen.engine.selfmon import SelfMonitor
from loadgen.engine.stopping import Stopper
from loadgen.engine.transport import Transport, make_http_client
from loadgen.records import RecordWriter
from loadgen.results import RECORDS_FILE
from loadgen.run_facts import RunFacts
from loadgen.scenario import Scenario


class Session:
    def __init__(self, scenario: Scenario, out_dir: Path, facts: RunFacts, *,
                 transport: Transport, api_key: str | None, progress: Progress,
                 in_flight: InFlight | None = None) -> None:
        self.scenario = scenario
        self.facts = facts
        self.progress = progress
        self.in_flight = in_flight or InFlight()
        self.stopper = Stopper()
        self.selfmon = SelfMonitor()
        load = scenario.load
        self.http = make_http_client(transport, load.concurrency, scenario.target.verify_tls,
                                     load.connect_timeout_s, load.idle_connection_s)
        self.client = ChatClient(self.http, Timeouts(
            load.connect_timeout_s, load.first_token_timeout_s, load.idle_timeout_s,
            load.total_timeout_s), api_key)
        self._records_path = out_dir / RECORDS_FILE
        self.writer: RecordWriter | None = None
        self.pacer: Pacer | None = None
        self.outage: OutageWatch | None = None

    async def __aenter__(self) -> Session:
        await self.http.__aenter__()
        self.writer = RecordWriter(self._records_path)
        self.pacer = Pacer(self.facts.base_urls, self.scenario.load.rate_limit)
        self.outage = OutageWatch(self.http, self.pacer, self.scenario.load, self.stopper,
                                  self.facts, say=self.progress.note)
        self.stopper.install_signals(asyncio.get_running_loop())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stopper.remove_signals(asyncio.get_running_loop())
        self.progress.close()
        await self.selfmon.stop()
        if self.outage is not None:
            self.outage.cancel()
        if self.writer is not None:
            self.writer.close()
        await self.http.__aexit__(exc_type, exc, tb)

    @property
    def records_written(self) -> int:
        return self.writer.count if self.writer is not None else 0
