"""The sim with good receipts behind a proxy that rewrites its replies: the gate must fail.

Receipts prove what the server's builder did; they say nothing of what reached the
client. A proxy (an ingress, a broken router, a cache) that rewrites every reply into
salad, or into the codes of the request it served before (a stale slot), must fail a
candidate whose receipts are perfect. The same proxy passing replies through unchanged
must pass, so the failures are the rewriting's, not the proxy's.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from server_patch.sim.config import SimConfig
from server_patch.sim.facts import find_codes
from server_patch.sim.server import RunningSim, start_in_thread
from tests.loadgen.conftest import REPO, run_cli
from tests.support import broken_servers, broken_text
from tests.support.openai_fake import ServerThread

SCENARIO = (REPO / "scenarios" / "sim-smoke.toml").read_text()
#: The delta fields a reply's text travels in.
TEXT_FIELDS = ("content", "reasoning_content", "reasoning")

Rewrite = Callable[[dict[str, Any], list[dict[str, Any]]], list[dict[str, Any]]]


def _text_pieces(chunks: list[dict[str, Any]]
                 ) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Every (field, holder, key) whose value is a piece of reply text, in stream order;
    `field` names what the pieces add up to (the content, one call's arguments)."""
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            for key in TEXT_FIELDS:
                if isinstance(delta.get(key), str):
                    yield key, delta, key
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                if isinstance(function.get("arguments"), str):
                    yield f"call {call.get('index', 0)}", function, "arguments"


def identity(body: dict[str, Any], chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return chunks


def salad(body: dict[str, Any], chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each prose piece becomes the next word of real words in random order."""
    words = broken_text.real_words_shuffled(len(body["messages"][-1]["content"]), 400).split()
    i = 0
    for _, holder, key in _text_pieces(chunks):
        if key != "arguments" and holder[key].strip():
            holder[key] = words[i % len(words)] + " "
            i += 1
    return chunks


class StaleSlot:
    """Each reply states the codes of the request served before it, not its own, each
    written as a reply that read them may write them (case, separators, a look-alike
    letter, one character short: the forms taken in turn)."""

    def __init__(self) -> None:
        self.previous: list[str] = []
        self.rng = random.Random("stale-slot")
        self.served = 0

    def __call__(self, body: dict[str, Any], chunks: list[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
        own = find_codes("\n".join(str(m.get("content") or "") for m in body["messages"]
                                   if m.get("role") == "user"))
        stale, self.previous = self.previous, own
        if not stale:
            return chunks
        form = broken_servers.FORMS[self.served % len(broken_servers.FORMS)]
        self.served += 1
        swap = {mine: broken_servers.written(theirs, form, self.rng)
                for mine, theirs in zip(own, stale, strict=False)}
        # Codes are split across deltas: join each field, swap, and send it whole.
        fields: dict[str, list[tuple[dict[str, Any], str]]] = {}
        for field, holder, key in _text_pieces(chunks):
            fields.setdefault(field, []).append((holder, key))
        for pieces in fields.values():
            text = "".join(h[k] for h, k in pieces)
            for mine, theirs in swap.items():
                text = text.replace(mine, theirs)
            for n, (holder, key) in enumerate(pieces):
                holder[key] = text if n == 0 else ""
        return chunks


def proxy_app(upstream: str, rewrite: Rewrite) -> Starlette:
    client = httpx.AsyncClient(base_url=upstream, timeout=120)

    async def forward(request: Request) -> Response:
        path = request.url.path
        raw = await request.body()
        if request.method != "POST" or not path.endswith("/chat/completions"):
            got = await client.request(request.method, path, content=raw,
                                       params=dict(request.query_params))
            return Response(got.content, status_code=got.status_code,
                            media_type=got.headers.get("content-type"))
        body = json.loads(raw)
        chunks: list[dict[str, Any]] = []
        async with client.stream("POST", path, json=body) as got:
            async for line in got.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(json.loads(line[len("data: "):]))
        chunks = rewrite(body, chunks)

        async def lines() -> Any:
            for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(lines(), media_type="text/event-stream")

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[RunningSim]:
    receipts = tmp_path / "receipts"
    receipts.mkdir()
    running = start_in_thread(SimConfig(layout="capacity", receipts_dir=str(receipts)))
    yield running
    running.stop()


def run_behind(tmp_path: Path, sim: RunningSim, rewrite: Rewrite) -> dict[str, Any]:
    proxy = ServerThread(proxy_app(sim.base_url, rewrite)).start()
    try:
        text = SCENARIO.split("[target.sim]")[0] + "[load]" + SCENARIO.split("[load]")[1]
        text = text.replace("measurement = 64", "measurement = 32")
        text = text.replace("priming = 16", "priming = 0")
        text = text.replace("prove_below = 0.05", "prove_below = 0.9")
        scenario = tmp_path / "sim-behind-proxy.toml"
        scenario.write_text(text)
        out = tmp_path / "out"
        done = run_cli("run", str(scenario), "--base-url", proxy.url,
                       "--receipts-dir", str(sim.receipts_dir), "--out", str(out), "--quiet")
        summary = json.loads((out / "summary.json").read_text())
        summary["_exit"] = done.returncode
        return summary
    finally:
        proxy.stop()


def test_the_proxy_passing_replies_through_passes(tmp_path: Path, sim: RunningSim) -> None:
    s = run_behind(tmp_path, sim, identity)
    assert s["_exit"] == 0, s["gate"]
    assert s["phases"]["measurement"]["verdicts"] == {"ok": 32}


@pytest.mark.parametrize(("rewrite", "verdict"), [(salad, "garbled"),
                                                  (StaleSlot(), "cross_talk")],
                         ids=["salad", "stale_slot"])
def test_perfect_receipts_do_not_hide_rewritten_replies(tmp_path: Path, sim: RunningSim,
                                                        rewrite: Rewrite,
                                                        verdict: str) -> None:
    s = run_behind(tmp_path, sim, rewrite)
    assert s["_exit"] == 1, s["gate"]
    receipts = next(c for c in s["gate"]["checks"] if c["name"].startswith("patch receipts"))
    assert receipts["passed"], receipts
    assert s["phases"]["measurement"]["verdicts"].get(verdict, 0) >= 16, \
        s["phases"]["measurement"]["verdicts"]
