"""The client watching itself: a blocked event loop is reported as saturation."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from loadgen.engine.selfmon import SelfMonitor
from loadgen.report.markdown import render_markdown
from loadgen.run_facts import ClientReport, RunFacts
from tests.support.reports import judged, record


def test_a_blocked_loop_is_saturation() -> None:
    async def go(block: bool) -> ClientReport:
        mon = SelfMonitor(interval_s=0.01)
        mon.start()
        for _ in range(20):
            if block:
                time.sleep(0.08)  # a client too busy to read its sockets on time
            await asyncio.sleep(0.01)
        await mon.stop()
        return mon.report(requests=100)

    busy = asyncio.run(go(True))
    assert busy.saturated is True and (busy.loop_lag_ms_p99 or 0) >= 50
    idle = asyncio.run(go(False))
    assert idle.saturated is False and (idle.loop_lag_ms_p99 or 0) < 50
    assert idle.cpu_ms_per_request is not None


def test_the_report_says_when_timings_are_the_clients(tmp_path: Path) -> None:
    def facts(saturated: bool) -> RunFacts:
        return RunFacts(run_id="r", scenario="s", base_urls=["http://x"], client=ClientReport(
            saturated=saturated, cpu_util=0.98, loop_lag_ms_p99=120.0))

    text = render_markdown(judged(tmp_path / "a", [record(0)], facts=facts(True)))
    assert "Client saturated" in text and "timings are the client's" in text
    assert "Client saturated" not in render_markdown(
        judged(tmp_path / "b", [record(0)], facts=facts(False)))
