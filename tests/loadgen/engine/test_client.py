"""The client against a misbehaving real server, on both HTTP stacks: every fault ends
as a record with the right verdict, never as an exception out of the client."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from loadgen.engine.client import ChatClient, Timeouts
from loadgen.engine.transport import make_http_client
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from loadgen.workload.tools import BILLING_TOOLS, offered_tools
from tests.support.openai_fake import MODE_VERDICTS, MODEL

TRANSPORTS = ["raw", "aiohttp", "httpx"]
FAST = Timeouts(connect=2.0, first_token=1.0, idle=0.5, total=3.0)


async def _send(url: str, transport: str, mode: str, timeouts: Timeouts = FAST,
                stream: bool = True, **extra) -> tuple[RequestRecord, float | None]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 64, "stream": stream, "fake_mode": mode,
            "tools": BILLING_TOOLS, **extra}
    if stream:
        body["stream_options"] = {"include_usage": True}
    async with make_http_client(transport, 4, True, timeouts.connect) as http:
        client = ChatClient(http, timeouts)
        # A tool turn, as the tool-turn workload sends it: a tool call is the healthy reply.
        record = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                               endpoint=url, item_id="i", params={
                                   "tools": offered_tools(BILLING_TOOLS), "tool_choice": None,
                                   "expects_tool_call": True})
        retry_after = await client.send(record, orjson.dumps(body), stream)
    record.verdicts = classify(record, VerdictConfig())
    return record, retry_after


def send(url: str, transport: str, mode: str, **kw) -> tuple[RequestRecord, float | None]:
    return asyncio.run(_send(url, transport, mode, **kw))


# slow_total needs its own timeouts (test_total_timeout_while_tokens_keep_coming).
CASES = [(mode, verdict) for mode, verdict in MODE_VERDICTS.items() if mode != "slow_total"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode,verdict", CASES)
def test_each_fault_gets_its_verdict(fake_server, transport: str, mode: str, verdict: str):
    fake, srv = fake_server()
    # A stall is 5 s (past every limit); a slow server takes 0.3 s (within them).
    record, _ = send(srv.url, transport, mode, fake_stall_s=0.3 if mode == "slow_read" else 5)
    assert record.verdicts[0] == verdict, (record.error, record.verdicts)
    assert fake.counts[mode] == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_healthy_tool_call_is_assembled_with_timings(fake_server, transport: str) -> None:
    _, srv = fake_server()
    record, _ = send(srv.url, transport, "ok")
    assert record.status == 200 and record.error is None
    assert record.finish_reason == "tool_calls"
    call = record.tool_calls[0]
    assert call["function"]["name"] == "change_plan"
    assert orjson.loads(call["function"]["arguments"]) == {"account_id": "XEHM4B",
                                                          "plan": "business"}
    assert record.reasoning.startswith("The user wants account XEHM4B")
    t = record.timings
    assert 0 <= t.first_byte <= t.first_reasoning <= t.first_content <= t.end
    assert t.chunks > 10 and t.gap_mean is not None and t.gap_max >= t.gap_p50
    assert record.usage.reasoning_tokens > 0 and record.usage.prompt_tokens == 300


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_non_streamed_response(fake_server, transport: str) -> None:
    _, srv = fake_server()
    record, _ = send(srv.url, transport, "nonstream", stream=False)
    assert record.verdicts == ["ok"]
    assert record.reasoning == "Upgrade first."
    assert record.tool_calls[0]["function"]["name"] == "change_plan"
    assert record.usage.completion_tokens == 40


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_retry_after_is_returned(fake_server, transport: str) -> None:
    _, srv = fake_server()
    record, retry_after = send(srv.url, transport, "http_429")
    assert retry_after == 1.0 and record.status == 429
    assert record.error.startswith("HTTP 429: 429: injected 429")
    _, retry_after = send(srv.url, transport, "http_429_bare")
    assert retry_after is None


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_error_bodies_are_kept(fake_server, transport: str) -> None:
    _, srv = fake_server()
    record, _ = send(srv.url, transport, "ok", max_tokens=100_000)
    assert record.status == 400 and "cannot be greater than max_model_len" in record.error
    record, _ = send(srv.url, transport, "ok", model="nope")
    assert record.status == 404 and "does not exist" in record.error


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stall_keeps_partial_reasoning(fake_server, transport: str) -> None:
    _, srv = fake_server()
    record, _ = send(srv.url, transport, "stall_mid", fake_stall_s=5)
    assert record.error.startswith("timeout: idle")
    assert record.reasoning == "The user wants "


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_total_timeout_while_tokens_keep_coming(fake_server, transport: str) -> None:
    _, srv = fake_server()
    t = Timeouts(connect=2.0, first_token=2.0, idle=1.0, total=0.6)
    record, _ = send(srv.url, transport, "slow_total", timeouts=t, fake_gap_s=0.05)
    assert record.error.startswith("timeout: total"), record.error
    assert record.reasoning.startswith("hmm ")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_connection_refused(transport: str) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    record, _ = send(f"http://127.0.0.1:{port}", transport, "ok")
    assert record.verdicts == ["http_error"]
    assert record.error.startswith("connection failed"), record.error
