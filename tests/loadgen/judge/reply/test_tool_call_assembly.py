"""Tool calls assembled from the fragments servers really stream (engine.client).

Each stream is shaped the way vLLM (0.32 chunk layout: `logprobs`, `token_ids`,
`stop_reason` beside the delta) or SGLang streams it: the name repeated in every
fragment, `index` left off continuation fragments, parallel calls that all say index 0
and differ by id, arguments whole or in pieces or whole again at the end.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from loadgen.engine.client import ChatClient, Timeouts, _ToolCalls
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

ARGS = '{"account_id": "XEHM4B", "plan": "business"}'
LOOKUP = '{"account_id": "XEHM4B"}'
PIECES = ['{"', "account", '_id": "', "XEHM", '4B", "', "plan", '": "', "business", '"}']
OFFERED = {"get_account": ["account_id"], "change_plan": ["account_id", "plan"]}


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
              "token_ids": None}
    if finish:
        choice["stop_reason"] = None
    obj = {"id": "chatcmpl-9497428396bcdf3d", "object": "chat.completion.chunk",
           "created": 1795940895, "model": "dsv4", "choices": [choice]}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def stream(*fragment_lists: list[dict[str, Any]], finish: str = "tool_calls") -> bytes:
    parts = [chunk({"role": "assistant", "content": ""}),
             chunk({"reasoning": "Look it up, then upgrade."})]
    parts += [chunk({"tool_calls": frags}) for frags in fragment_lists]
    parts.append(chunk({"content": ""}, finish))
    return b"".join(parts) + b"data: [DONE]\n\n"


def replay(body: bytes, *, stream_it: bool = True,
           content_type: str = "text/event-stream") -> RequestRecord:
    """Send one request through ChatClient; the transport answers with `body`."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": content_type})

    async def go() -> RequestRecord:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            client = ChatClient(http, Timeouts(5, 5, 5, 10))
            rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                                endpoint="http://server", item_id="i",
                                params={"tools": OFFERED, "tool_choice": None,
                                        "expects_tool_call": True})
            await client.send(rec, b"{}", stream_it)
        rec.verdicts = classify(rec, VerdictConfig())
        return rec

    return asyncio.run(go())


def calls_of(rec: RequestRecord) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], orjson.loads(c["function"]["arguments"]))
            for c in rec.tool_calls]


def head(name: str, index: int | None = 0, call_id: str = "chatcmpl-tool-a1",
         arguments: str = "") -> dict[str, Any]:
    frag: dict[str, Any] = {"id": call_id, "type": "function",
                            "function": {"name": name, "arguments": arguments}}
    if index is not None:
        frag["index"] = index
    return frag


def piece(arguments: str, index: int | None = 0, **extra: Any) -> dict[str, Any]:
    frag: dict[str, Any] = {"function": {"arguments": arguments}, **extra}
    if index is not None:
        frag["index"] = index
    return frag


# -------------------------------------------------------------------- recorded shapes


def test_openai_shape_name_once_then_argument_pieces() -> None:
    rec = replay(stream([head("change_plan")], *([piece(p)] for p in PIECES)))
    assert rec.error is None and rec.verdicts == ["ok"]
    assert calls_of(rec) == [("change_plan", {"account_id": "XEHM4B", "plan": "business"})]
    assert rec.tool_calls[0]["id"] == "chatcmpl-tool-a1"


def test_the_name_repeated_in_every_fragment_is_kept_once() -> None:
    frags = [[{"index": 0, "id": "call_0", "type": "function",
               "function": {"name": "change_plan", "arguments": p}}] for p in PIECES]
    rec = replay(stream(*frags))
    assert rec.verdicts == ["ok"], rec.findings
    assert calls_of(rec) == [("change_plan", {"account_id": "XEHM4B", "plan": "business"})]


def test_continuation_fragments_without_index_continue_the_current_call() -> None:
    rec = replay(stream([head("change_plan")], *([piece(p, index=None)] for p in PIECES)))
    assert rec.verdicts == ["ok"], rec.findings
    assert calls_of(rec) == [("change_plan", {"account_id": "XEHM4B", "plan": "business"})]


def test_no_index_anywhere_and_a_new_id_starts_the_next_call() -> None:
    rec = replay(stream([head("get_account", index=None, call_id="call_a")],
                        [piece(LOOKUP[:10], index=None)], [piece(LOOKUP[10:], index=None)],
                        [head("change_plan", index=None, call_id="call_b")],
                        *([piece(p, index=None)] for p in PIECES)))
    assert rec.verdicts == ["ok"], rec.findings
    assert calls_of(rec) == [("get_account", {"account_id": "XEHM4B"}),
                             ("change_plan", {"account_id": "XEHM4B", "plan": "business"})]
    assert [c["id"] for c in rec.tool_calls] == ["call_a", "call_b"]


def test_vllm_parallel_calls_that_all_say_index_0() -> None:
    # vLLM: each call's first fragment carries a new id; continuations carry id "".
    rec = replay(stream([head("get_account", call_id="chatcmpl-tool-c9Z")],
                        [piece(LOOKUP, id="", type="function")],
                        [head("change_plan", call_id="chatcmpl-tool-Hfz")],
                        *([piece(p, id="", type="function")] for p in PIECES)))
    assert rec.verdicts == ["ok"], rec.findings
    assert calls_of(rec) == [("get_account", {"account_id": "XEHM4B"}),
                             ("change_plan", {"account_id": "XEHM4B", "plan": "business"})]


def test_sglang_parallel_calls_repeat_their_id_in_every_fragment() -> None:
    rec = replay(stream([head("get_account", call_id="0")], [piece(LOOKUP, id="0")],
                        [head("change_plan", call_id="1")],
                        *([piece(p, id="1")] for p in PIECES)))
    assert rec.verdicts == ["ok"], rec.findings
    assert [c["id"] for c in rec.tool_calls] == ["0", "1"]
    assert [name for name, _ in calls_of(rec)] == ["get_account", "change_plan"]


def test_parallel_calls_with_their_own_indexes_interleaved() -> None:
    rec = replay(stream([head("get_account", 0, "call_a"), head("change_plan", 1, "call_b")],
                        [piece(LOOKUP[:12], 0), piece(ARGS[:20], 1)],
                        [piece(ARGS[20:], 1)], [piece(LOOKUP[12:], 0)]))
    assert rec.verdicts == ["ok"], rec.findings
    assert calls_of(rec) == [("get_account", {"account_id": "XEHM4B"}),
                             ("change_plan", {"account_id": "XEHM4B", "plan": "business"})]


def test_arguments_whole_in_the_first_fragment() -> None:
    rec = replay(stream([head("change_plan", arguments=ARGS)]))
    assert rec.verdicts == ["ok"]
    assert calls_of(rec) == [("change_plan", {"account_id": "XEHM4B", "plan": "business"})]


def test_arguments_sent_whole_again_at_the_end_are_not_doubled() -> None:
    rec = replay(stream([head("change_plan")], *([piece(p)] for p in PIECES), [piece(ARGS)]))
    assert rec.verdicts == ["ok"], rec.findings
    assert rec.tool_calls[0]["function"]["arguments"] == ARGS


def test_several_fragments_of_one_call_in_one_delta() -> None:
    rec = replay(stream([head("change_plan"), piece(ARGS[:15]), piece(ARGS[15:])]))
    assert rec.verdicts == ["ok"]
    assert rec.tool_calls[0]["function"]["arguments"] == ARGS


def test_non_streamed_message_tool_calls() -> None:
    body = orjson.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "dsv4",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "stop_reason": None,
                     "message": {"role": "assistant", "content": None, "reasoning": "Both.",
                                 "tool_calls": [
                                     {"id": "t1", "type": "function", "function": {
                                         "name": "get_account", "arguments": LOOKUP}},
                                     {"id": "t2", "type": "function", "function": {
                                         "name": "change_plan", "arguments": ARGS}}]}}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 40, "total_tokens": 340}})
    rec = replay(body, stream_it=False, content_type="application/json")
    assert rec.verdicts == ["ok"], (rec.error, rec.findings)
    assert calls_of(rec) == [("get_account", {"account_id": "XEHM4B"}),
                             ("change_plan", {"account_id": "XEHM4B", "plan": "business"})]
    assert [c["id"] for c in rec.tool_calls] == ["t1", "t2"]


@pytest.mark.parametrize("fragment", [
    "not an object", {"index": "0", "function": {"name": "x"}},
    {"index": True, "function": {"name": "x"}}, {"index": 0, "function": "change_plan"},
    {"index": 0, "function": {"name": 7}}, {"index": 0, "function": {"arguments": {"a": 1}}},
])
def test_a_fragment_not_shaped_like_a_tool_call_is_a_stream_error(fragment: Any) -> None:
    rec = replay(stream([fragment]))
    assert rec.verdicts == ["stream_error"]
    assert "malformed tool_calls" in rec.error


# ------------------------------------------------------------------ the merging rules


def test_a_name_sent_in_pieces_is_joined() -> None:
    calls = _ToolCalls()
    assert calls.add([head("change_")]) and calls.add([{"index": 0, "function": {"name": "plan"}}])
    assert calls.add([piece(ARGS)])
    assert calls.result()[0]["function"] == {"name": "change_plan", "arguments": ARGS}


def test_arguments_sent_cumulatively_keep_the_latest() -> None:
    calls = _ToolCalls()
    calls.add([head("change_plan")])
    for end in range(5, len(ARGS) + 1, 5):
        calls.add([piece(ARGS[:end])])
    calls.add([piece(ARGS)])
    assert calls.result()[0]["function"]["arguments"] == ARGS


def test_without_index_or_id_a_new_name_after_arguments_starts_the_next_call() -> None:
    calls = _ToolCalls()
    calls.add([{"function": {"name": "get_account", "arguments": LOOKUP}}])
    calls.add([{"function": {"name": "change_plan", "arguments": ARGS}}])
    assert [c["function"]["name"] for c in calls.result()] == ["get_account", "change_plan"]
    assert [c["function"]["arguments"] for c in calls.result()] == [LOOKUP, ARGS]


def test_a_continuation_with_an_empty_id_or_the_same_id_stays_in_its_call() -> None:
    calls = _ToolCalls()
    calls.add([head("change_plan", call_id="x")])
    calls.add([piece(ARGS[:10], id="")])
    calls.add([piece(ARGS[10:], id="x")])
    (call,) = calls.result()
    assert call["id"] == "x" and call["function"]["arguments"] == ARGS
