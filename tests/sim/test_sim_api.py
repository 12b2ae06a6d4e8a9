"""The sim speaks vLLM's protocol: stream shape, usage, tool calls, errors, metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from server_patch.c128a import LAYOUTS
from server_patch.sim.cli import GRAPH_MODE_CHOICES, LAYOUT_CHOICES
from server_patch.sim.config import GRAPH_MODES, SimConfig
from server_patch.sim.server import RunningSim, start_in_thread

TOOLS = [{"type": "function", "function": {
    "name": "change_plan", "description": "Move an account to another plan.",
    "parameters": {"type": "object", "properties": {
        "account_id": {"type": "string"},
        "plan": {"type": "string", "enum": ["free", "pro", "business"]}},
        "required": ["account_id", "plan"]}}}]
MESSAGES = [{"role": "user", "content": "Please upgrade XEHM4B to business, then cancel it."}]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSim]:
    receipts = tmp_path_factory.mktemp("receipts")
    running = start_in_thread(SimConfig(layout="prefix", max_model_len=1024,
                                        receipts_dir=str(receipts)))
    yield running
    running.stop()


def events(resp: httpx.Response) -> list:
    out = []
    for block in resp.text.split("\n\n"):
        if block.startswith("data: "):
            data = block[6:]
            out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


def test_layout_choices_match_the_builder() -> None:
    assert sorted(LAYOUT_CHOICES) == sorted(LAYOUTS)


def test_graph_mode_choices_match_the_config() -> None:
    from loadgen.scenario import SimTarget

    assert GRAPH_MODE_CHOICES == GRAPH_MODES
    assert SimTarget.model_fields["graph_mode"].annotation.__args__ == GRAPH_MODES


@pytest.mark.parametrize("key", ["salad_foreign_share", "cross_talk_foreign_share",
                                 "fatal_foreign_share"])
def test_the_foreign_share_keys_have_one_default(key: str) -> None:
    """The config, the scenario's [target.sim] and `dsv4-qual sim` agree on each default."""
    import dataclasses

    from loadgen.scenario import SimTarget
    from server_patch.sim.cli import sim_command

    (option,) = [p for p in sim_command.params if p.name == key]
    config = {f.name: f.default for f in dataclasses.fields(SimConfig)}[key]
    assert option.default == config == SimTarget.model_fields[key].default


def test_health_models_tokenize(sim: RunningSim) -> None:
    assert httpx.get(f"{sim.base_url}/health").status_code == 200
    models = httpx.get(f"{sim.base_url}/v1/models").json()
    assert models["data"][0]["id"] == "dsv4-sim"
    assert models["data"][0]["max_model_len"] == 1024
    tok = httpx.post(f"{sim.base_url}/tokenize", json={"prompt": "Hello, world!"}).json()
    assert tok["count"] == 4


def test_streamed_tool_call_is_vllm_shaped(sim: RunningSim) -> None:
    body = {"model": "dsv4-sim", "messages": MESSAGES, "tools": TOOLS, "max_tokens": 200,
            "stream": True, "stream_options": {"include_usage": True}}
    resp = httpx.post(f"{sim.base_url}/v1/chat/completions", json=body, timeout=30)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    ev = events(resp)
    assert ev[-1] == "[DONE]"
    assert ev[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [e["choices"][0]["delta"] for e in ev[1:-1] if e["choices"]]
    reasoning = "".join(d.get("reasoning", "") for d in deltas)
    assert reasoning.startswith("The user asks:") and "reasoning_content" not in deltas[1]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0]["function"]["name"] == "change_plan" and calls[0]["id"]
    args = "".join(c["function"]["arguments"] for c in calls)
    assert orjson.loads(args) == {"account_id": "XEHM4B", "plan": "business"}
    finish = [e["choices"][0]["finish_reason"] for e in ev[1:-1] if e["choices"]]
    assert finish[-1] == "tool_calls" and all(f is None for f in finish[:-1])
    usage = ev[-2]["usage"]
    assert ev[-2]["choices"] == []
    # every token was streamed except the hidden </think>; deltas end with the finish chunk
    assert usage["completion_tokens"] == len(deltas)
    assert 0 < usage["completion_tokens_details"]["reasoning_tokens"] < usage["completion_tokens"]


def test_answer_without_tools_and_length_cap(sim: RunningSim) -> None:
    body = {"model": "dsv4-sim", "messages": MESSAGES, "max_tokens": 5, "stream": True}
    ev = events(httpx.post(f"{sim.base_url}/v1/chat/completions", json=body, timeout=30))
    assert ev[-2]["choices"][0]["finish_reason"] == "length"
    assert "usage" not in ev[-2]
    body = {"model": "dsv4-sim", "messages": MESSAGES, "max_tokens": 300, "stream": True}
    ev = events(httpx.post(f"{sim.base_url}/v1/chat/completions", json=body, timeout=30))
    content = "".join(e["choices"][0]["delta"].get("content", "") for e in ev[1:-1])
    assert ev[-2]["choices"][0]["finish_reason"] == "stop" and content.startswith("Done:")


def test_non_streamed(sim: RunningSim) -> None:
    body = {"model": "dsv4-sim", "messages": MESSAGES, "tools": TOOLS, "max_tokens": 200}
    data = httpx.post(f"{sim.base_url}/v1/chat/completions", json=body, timeout=30).json()
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["reasoning"].startswith("The user asks:")
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "change_plan"
    assert data["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0


@pytest.mark.parametrize("body,status,message", [
    ({"model": "nope", "messages": MESSAGES}, 404, "The model `nope` does not exist."),
    ({"model": "dsv4-sim", "messages": MESSAGES, "max_tokens": 5000}, 400,
     "max_tokens=5000 cannot be greater than max_model_len=1024"),
    ({"model": "dsv4-sim", "messages": [{"role": "user", "content": "word " * 1000}],
      "max_tokens": 100}, 400, "maximum context length is 1024 tokens"),
    ({"model": "dsv4-sim"}, 400, "messages"),
])
def test_vllm_like_errors(sim: RunningSim, body: dict, status: int, message: str) -> None:
    resp = httpx.post(f"{sim.base_url}/v1/chat/completions", json=body)
    assert resp.status_code == status
    assert message in resp.json()["error"]["message"]


def test_metrics_name_the_layout(sim: RunningSim) -> None:
    text = httpx.get(f"{sim.base_url}/metrics").text
    assert ('dsv4_qual_c128a_layout_info{layout="prefix",device="cpu",'
            'graph_mode="full_and_piecewise",indexer="runtime"} 1') in text
    assert "vllm:num_requests_running" in text and "vllm:generation_tokens_total" in text
    # Each face of the bug has its counter (none here: prefix never reads foreign KV).
    for name in ("corrupted", "cross_talk", "salad"):
        assert f"# TYPE dsv4_qual_sim_{name}_requests_total counter" in text
        assert f"dsv4_qual_sim_{name}_requests_total 0\n" in text


def test_receipt_records_the_first_call(sim: RunningSim) -> None:
    from server_patch.receipts import load_receipts

    receipts = load_receipts(sim.receipts_dir)
    assert len(receipts) == 1
    r = receipts[0]
    assert r["layout"] == "prefix" and r["patched"] is True
    assert r["first_call"]["row_stride_decode"] == SimConfig(max_model_len=1024).capacity
    # The sim's one process runs the model and builds its one C128A group's metadata.
    assert r["model"]["loaded"] is True and r["model"]["c128a_builders"] == 1



def builder_calls_on_metrics(base_url: str) -> int:
    for line in httpx.get(f"{base_url}/metrics").text.splitlines():
        if line.startswith("dsv4_qual_c128a_builder_calls_total "):
            return int(float(line.split()[1]))
    raise AssertionError("no builder-call counter on /metrics")


def test_a_reply_that_has_ended_is_counted_in_the_receipt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate reads the receipt once the replies have ended: by then it must hold every
    builder call made for them, however seldom the periodic flush comes (here never
    within the test: the race a fast soak round lost, made wide)."""
    from concurrent.futures import ThreadPoolExecutor

    from server_patch.receipts import load_receipts
    from server_patch.sim import server as sim_server

    monkeypatch.setattr(sim_server, "GUARD_FLUSH_S", 3600.0)
    running = start_in_thread(SimConfig(layout="capacity", max_model_len=1024,
                                        receipts_dir=str(tmp_path)))
    body = {"model": "dsv4-sim", "messages": MESSAGES, "tools": TOOLS, "max_tokens": 60,
            "stream": True}

    def ask(_: int) -> None:
        resp = httpx.post(f"{running.base_url}/v1/chat/completions", json=body, timeout=30)
        assert events(resp)[-1] == "[DONE]"

    try:
        for concurrent in (1, 4):
            with ThreadPoolExecutor(concurrent) as pool:
                list(pool.map(ask, range(concurrent)))
            (receipt,) = load_receipts(tmp_path)
            served = builder_calls_on_metrics(running.base_url)
            assert served > 0 and receipt["guard"]["calls"] == served
    finally:
        running.stop()


@pytest.mark.slow
def test_sim_command_serves_and_refuses_a_busy_port() -> None:
    import signal
    import socket
    import subprocess
    import time

    from tests.support.cli import cli_command, cli_env, run_cli

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    proc = run_cli("sim", "--port", str(port))
    assert proc.returncode == 3 and "Address already in use" in proc.stderr
    assert "Traceback" not in proc.stderr
    busy.close()

    server = subprocess.Popen(cli_command("sim", "--layout", "packed", "--port", str(port),
                                          "--max-model-len", "1024", "--graph-mode", "full"),
                              env=cli_env(),
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the sim did not come up"
            time.sleep(0.2)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert 'layout="packed"' in metrics and 'graph_mode="full"' in metrics
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
