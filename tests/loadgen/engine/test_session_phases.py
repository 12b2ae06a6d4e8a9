"""Sessions through the engine: one worker sends a session's turns in order, each after the
previous reply and its think time; concurrency counts sessions; a phase boundary cuts a
session and the next phase goes on with it; worker processes never split one.

An `httpx.MockTransport` answers (no server): it records when each turn arrived, and
how many requests were in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from loadgen.engine.phase import Shard, run_phase
from loadgen.engine.plan import RunPlan
from loadgen.engine.progress import Progress
from loadgen.engine.requests import RequestMaker
from loadgen.engine.session import Session
from loadgen.records import iter_record_dicts
from loadgen.run_facts import RunFacts
from loadgen.scenario import Scenario
from tests.loadgen.engine.test_engine_mock_transport import sse

URL = "http://a.test"
THINK = 0.15


def scenario(sessions: int, concurrency: int, measurement: int, priming: int = 0,
             think: float = THINK) -> Scenario:
    return Scenario.model_validate({
        "target": {"base_urls": [URL]},
        "load": {"concurrency": concurrency, "measurement": measurement, "priming": priming},
        "request": {"max_tokens": 64},
        "workload": {"kind": "session", "sessions": sessions, "turns": 4,
                     "shared_prefix_tokens": [100], "think_time_s": [think, think]},
        "gate": {"prove_below": 0.6}})


class Arrivals:
    """What the mock server saw: (session's first user message, messages, arrival time)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, float]] = []
        self.in_flight = 0
        self.peak = 0

    async def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.seen.append((first, len(body["messages"]), time.monotonic()))
        await asyncio.sleep(0.02)
        self.in_flight -= 1
        return httpx.Response(200, content=sse("Done."),
                              headers={"content-type": "text/event-stream"})


def send(tmp_path: Path, sc: Scenario, phases: list[str], shard: Shard | None = None
         ) -> Arrivals:
    arrivals = Arrivals()
    tmp_path.mkdir(parents=True, exist_ok=True)
    facts = RunFacts(run_id="r", scenario="s", base_urls=[URL], model="m")
    plan = RunPlan.build(sc, None, RequestMaker(sc, "r", "m"))

    async def go() -> None:
        async with Session(sc, tmp_path, facts, transport=httpx.MockTransport(arrivals.handler),
                           api_key=None, progress=Progress(quiet=True)) as session:
            for phase in phases:
                await run_phase(session, plan.source(phase), plan.maker, phase,
                                plan.count(phase), shard or Shard())

    asyncio.run(go())
    return arrivals


def by_session(arrivals: Arrivals) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for first, size, at in arrivals.seen:
        out.setdefault(first, []).append((size, at))
    return out


def test_each_session_goes_in_order_after_its_think_time(tmp_path: Path) -> None:
    arrivals = send(tmp_path, scenario(sessions=3, concurrency=3, measurement=12),
                    ["measurement"])
    sessions = by_session(arrivals)
    assert len(sessions) == 3 and arrivals.peak <= 3
    for turns in sessions.values():
        sizes = [size for size, _ in turns]
        assert sizes == sorted(sizes) and len(sizes) == 4  # turn after turn, in order
        gaps = [b - a for (_, a), (_, b) in itertools.pairwise(turns)]
        assert all(gap >= THINK for gap in gaps)  # the reply, then the think time
    records = list(iter_record_dicts(tmp_path / "records.jsonl"))
    assert sorted(r["seq"] for r in records) == list(range(12))
    turns = {r["seq"]: r["params"]["turn"] for r in records}
    assert [turns[s]["index"] for s in range(12)] == [0, 1, 2, 3] * 3


def test_concurrency_counts_sessions_not_requests(tmp_path: Path) -> None:
    # Two sessions in flight, each thinking between turns: at most two requests at once,
    # and the third session waits for a slot.
    arrivals = send(tmp_path, scenario(sessions=3, concurrency=2, measurement=12),
                    ["measurement"])
    assert arrivals.peak <= 2
    starts = {first: turns[0][1] for first, turns in by_session(arrivals).items()}
    ends = {first: turns[-1][1] for first, turns in by_session(arrivals).items()}
    third = max(starts, key=starts.get)
    assert starts[third] >= min(ends.values())


def test_a_phase_boundary_cuts_a_session_and_the_next_phase_goes_on_with_it(
        tmp_path: Path) -> None:
    sc = scenario(sessions=2, concurrency=2, priming=2, measurement=6)
    arrivals = send(tmp_path, sc, ["priming", "measurement"])
    sizes = {first: [size for size, _ in turns] for first, turns in by_session(arrivals).items()}
    assert all(s == sorted(s) for s in sizes.values())
    records = sorted(iter_record_dicts(tmp_path / "records.jsonl"), key=lambda r: r["seq"])
    assert [r["phase"] for r in records] == ["priming"] * 2 + ["measurement"] * 6
    assert [r["params"]["turn"]["index"] for r in records] == [0, 1, 2, 3, 0, 1, 2, 3]


def test_worker_processes_never_split_a_session(tmp_path: Path) -> None:
    sc = scenario(sessions=4, concurrency=2, measurement=16, think=0.0)
    owned: list[set[str]] = []
    for index in (0, 1):
        arrivals = send(tmp_path / f"w{index}", sc, ["measurement"], Shard(index, 2))
        owned.append({first for first, _, _ in arrivals.seen})
        assert all(len(t) == 4 for t in by_session(arrivals).values())
    assert owned[0] and owned[1] and not owned[0] & owned[1]
    assert len(owned[0] | owned[1]) == 4


def test_the_reference_phase_sends_a_sessions_turn_alone(tmp_path: Path) -> None:
    sc = Scenario.model_validate({**scenario(2, 2, 8).model_dump(mode="python"),
                                  "reference": {"requests": 4}})
    plan = RunPlan.build(sc, None, RequestMaker(sc, "r", "m"))
    assert len(plan.reference) == 4 and all(i.turn is None for i in plan.reference)
    body: dict[str, Any] = orjson.loads(plan.maker.body(plan.reference[1]).raw)
    assert len(body["messages"]) > 2  # a later turn, its history whole
