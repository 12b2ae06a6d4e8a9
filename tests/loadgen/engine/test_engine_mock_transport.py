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


def _phase_records(tmp_path: Path, body: bytes, content_type: str, *,
                   stream: bool = True) -> list[dict]:
    """One phase of 4 requests, every reply `body`, judged as it lands."""
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": content_type})

    scenario = Scenario.model_validate({
        "target": {"base_urls": URLS[:1]}, "load": {"concurrency": 2, "measurement": 4},
        "request": {"max_tokens": 64, "stream": stream},
        "gate": {"prove_below": 0.6, "max_infra_errors": 4},
        "workload": {"kind": "replay", "path": "unused.jsonl"}})
    facts = RunFacts(run_id="r", scenario="s", base_urls=URLS[:1], model="m")
    items = [{"messages": [{"role": "user", "content": "What is the capital of France?"}]}]

    async def phase() -> None:
        async with Session(scenario, tmp_path, facts, transport=httpx.MockTransport(handler),
                           api_key=None, progress=Progress(quiet=True)) as session:
            from loadgen.workload.base import WorkItem

            source = SeqSource(iter([WorkItem(item_id=f"q{i}", messages=m["messages"])
                                     for i, m in enumerate(items * 4)]))
            await run_phase(session, source, RequestMaker(scenario, "r", "m"),
                            "measurement", 4)

    tmp_path.mkdir(parents=True, exist_ok=True)
    asyncio.run(phase())
    return list(iter_record_dicts(tmp_path / "records.jsonl"))


def _with_null_error(stream: bytes) -> bytes:
    """Every chunk of an SSE stream given `"error": null`, as some gateways send it."""
    out = []
    for line in stream.split(b"\n"):
        if line.startswith(b"data: {"):
            obj = orjson.loads(line[6:])
            obj["error"] = None
            line = b"data: " + orjson.dumps(obj)
        out.append(line)
    return b"\n".join(out)


def test_a_chunk_saying_error_null_is_no_error(tmp_path: Path) -> None:
    answer = "The capital of France is Paris."
    records = _phase_records(tmp_path / "stream", _with_null_error(sse(answer)),
                             "text/event-stream")
    assert [r["verdicts"] for r in records] == [["ok"]] * 4
    assert all(r["content"] == answer and r["error"] is None for r in records)
    whole = orjson.dumps({"id": "c", "object": "chat.completion", "model": "m", "error": None,
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": answer}}]})
    records = _phase_records(tmp_path / "whole", whole, "application/json", stream=False)
    assert [r["verdicts"] for r in records] == [["ok"]] * 4


def test_an_error_object_in_the_stream_is_still_a_stream_error(tmp_path: Path) -> None:
    broken = sse("The capital").replace(
        b'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
        b'"delta":{},"finish_reason":"stop"}]}',
        b'data: {"error": {"message": "engine died", "code": 500}}')
    records = _phase_records(tmp_path, broken, "text/event-stream")
    assert [r["verdicts"] for r in records] == [["stream_error"]] * 4
    assert all("engine died" in r["error"] for r in records)
