"""The client watching itself: a blocked event loop is reported as saturation, and the
reports say whose it was (the client's own work, or a busy host)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from loadgen.engine import selfmon
from loadgen.engine.selfmon import SelfMonitor, saturation_cause
from loadgen.report.html import render_html
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


def test_a_lagging_loop_says_whose_cpu_it_was() -> None:
    """Its own CPU, or its own blocking work (lag without waiting for a CPU): the
    client's. Lag while the loop waited for CPUs other processes held: the host's."""
    assert saturation_cause(0.95, 0.0, 0.0) == "client"
    assert saturation_cause(0.03, 0.01, 0.5) is None, "no lag, no saturation"
    assert saturation_cause(0.03, 0.120, 0.40) == "host"
    assert saturation_cause(0.60, 0.120, 0.30) == "host"
    assert saturation_cause(0.03, 0.120, 0.0) == "client", "a blocking call of its own"
    # Where the kernel says nothing of the wait: a lagging loop that barely ran was not
    # busy itself.
    assert saturation_cause(0.03, 0.120, None) == "host"
    assert saturation_cause(0.60, 0.120, None) == "client"


def test_a_busy_host_is_told_from_the_loops_wait_for_a_cpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop ready to run and kept waiting: 40 ms of run-queue wait a sample, with
    almost no CPU of its own (the waits below stand in for the kernel's figures)."""
    waited = iter(x * 0.04 for x in range(10_000))
    monkeypatch.setattr(selfmon, "runqueue_wait_s", lambda: next(waited))

    async def go() -> ClientReport:
        mon = SelfMonitor(interval_s=0.01)
        mon.start()
        for _ in range(20):
            time.sleep(0.06)  # the loop held up (by the host, says the wait)
            selfmon.runqueue_wait_s()
            await asyncio.sleep(0.01)
        await mon.stop()
        return mon.report(requests=100)

    report = asyncio.run(go())
    assert report.saturated and report.saturation == "host"
    assert report.cpu_util is not None and report.cpu_util < 0.25
    assert report.cpu_wait_share is not None and report.cpu_wait_share >= 0.05


def test_a_blocked_loop_measured_by_the_kernel_is_the_clients_own() -> None:
    """time.sleep on the loop: lag, no run-queue wait (sleeping is not waiting for a
    CPU), so not blamed on the host."""
    if selfmon.runqueue_wait_s() is None:
        pytest.skip("this kernel does not report a thread's run-queue wait")

    async def go() -> ClientReport:
        mon = SelfMonitor(interval_s=0.01)
        mon.start()
        for _ in range(20):
            time.sleep(0.08)
            await asyncio.sleep(0.01)
        await mon.stop()
        return mon.report(requests=100)

    report = asyncio.run(go())
    assert report.saturated and report.saturation == "client", report


def test_the_reports_say_which_it_was(tmp_path: Path) -> None:
    def facts(**client: object) -> RunFacts:
        return RunFacts(run_id="r", scenario="s", base_urls=["http://x"],
                        client=ClientReport(saturated=True, loop_lag_ms_p99=120.0, **client))

    own = judged(tmp_path / "own", [record(0)], facts=facts(cpu_util=0.98, saturation="client"))
    text = render_markdown(own)
    assert "Client saturated" in text and "own work" in text and "98%" in text
    assert "Host busy" not in text
    busy = judged(tmp_path / "busy", [record(0)],
                  facts=facts(cpu_util=0.03, saturation="host", cpu_wait_share=0.41))
    text = render_markdown(busy)
    assert "Host busy" in text and "3% of a CPU" in text and "41% of the run" in text
    assert "Client saturated" not in text
    html = render_html(busy)
    assert "Host busy" in html and "**" not in html.split('id="saturation"')[1][:300]
