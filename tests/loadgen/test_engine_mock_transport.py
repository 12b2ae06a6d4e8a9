"""The engine over a given transport: a phase that needs only replies starts no server.

`Session(transport=...)` takes an `httpx.AsyncBaseTransport` in place of a stack's name;
here an `httpx.MockTransport` answers, and a whole phase runs: every seq sent once, the
concurrency held, replicas taken round-robin, each record judged and appended.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import orjson

from loadgen.engine.phase import SeqSource, run_phase
from loadgen.engine.progress import Progress
from loadgen.engine.requests import RequestMaker
from loadgen.engine.session import Session
from loadgen.records import iter_record_dicts
from loadgen.run_facts import RunFacts
from loadgen.scenario import Scenario
from loadgen.workload import make_workload

URLS = ["http://a.test", "http://b.test"]


def sse(reply: str) -> bytes:
    """A streamed reply as vLLM sends it: reasoning, content, the finish, the usage."""
    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
        body = {"id": "c", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage:
            body = {**body, "choices": [], "usage": usage}
        return b"data: " + orjson.dumps(body) + b"\n\n"
    return (chunk({"role": "assistant", "reasoning": "The user asks; I answer."})
            + chunk({"content": reply}) + chunk({}, "stop")
            + chunk({}, usage={"prompt_tokens": 9, "completion_tokens": 12,
                               "total_tokens": 21})
            + b"data: [DONE]\n\n")


def test_a_phase_runs_over_a_mock_transport(tmp_path: Path) -> None:
    seen: list[tuple[str, dict]] = []
    in_flight = peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)  # the requests overlap, as on a server
        in_flight -= 1
        seen.append((f"{request.url.scheme}://{request.url.host}", json.loads(request.content)))
        return httpx.Response(200, content=sse("Paris is the capital of France."),
                              headers={"content-type": "text/event-stream"})

    scenario = Scenario.model_validate({
        "target": {"base_urls": URLS}, "load": {"concurrency": 3, "measurement": 7},
        "request": {"max_tokens": 64}, "gate": {"prove_below": 0.4}})
    facts = RunFacts(run_id="r", scenario="s", base_urls=URLS, model="m")

    async def phase() -> int:
        async with Session(scenario, tmp_path, facts, transport=httpx.MockTransport(handler),
                           api_key=None, progress=Progress(quiet=True)) as session:
            source = SeqSource(make_workload(scenario, None).items())
            await run_phase(session, source, RequestMaker(scenario, "r", "m"),
                            "measurement", 7)
            return session.records_written

    assert asyncio.run(phase()) == 7
    assert len(seen) == 7 and peak == 3
    records = list(iter_record_dicts(tmp_path / "records.jsonl"))
    assert sorted(r["seq"] for r in records) == list(range(7))
    assert {r["seq"]: r["endpoint"] for r in records} == {
        seq: URLS[seq % 2] for seq in range(7)}  # round-robin by seq
    # Each record judged as it landed: the default workload is a tool turn, and a reply
    # in prose, however fluent, is not the tool call the turn asked for.
    assert all(r["verdicts"] == ["no_tool_call"] and r["phase"] == "measurement"
               for r in records)
    assert all(body["model"] == "m" and body["stream"] is True for _, body in seen)
