"""A real OpenAI-compatible test server that answers each request the way it is told.

Which behaviour a request gets: the body's `fake_mode` (a scenario sets it through
`request.extra_body`), else the next entry of the server's plan (cycled by arrival
order). The server counts what it did per mode, so tests compare its own counters
with the run's summary. Chunks are shaped like vLLM 0.32's stream.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import re
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support import salad

MODEL = "fake-dsv4"
HEALTHY_REASONING = ("The user wants account {acc} moved to {plan} and then "
                     "cancelled. I should do the upgrade first with change_plan. ")
LOOP_SENTENCE = "Wait, the user wants to upgrade XEHM4B to business, then cancel it. "
COUNTED_LOOP = "Attempt {i}: let me re-read the request. "


class Chunks:
    """vLLM-shaped SSE chunk builder for one response."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{time.monotonic_ns()}"
        self.model = model
        self.created = int(time.time())
        #: Deltas built so far that carry text, reasoning or a call: each is at least one
        #: token, so an honest usage counts at least these (`usage`).
        self.tokens = 0
        #: Of them, those that carry reasoning: each is at least one reasoning token.
        self.thought = 0

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if delta.get("content") or delta.get("reasoning") or delta.get("tool_calls"):
            self.tokens += 1
        if delta.get("reasoning"):
            self.thought += 1
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                  "finish_reason": finish}
        if finish:
            choice["stop_reason"] = None
        obj = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
               "model": self.model, "choices": [choice]}
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def role(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def reasoning(self, text: str) -> bytes:
        return self._chunk({"reasoning": text})

    def content(self, text: str) -> bytes:
        return self._chunk({"content": text})

    def finish(self, reason: str) -> bytes:
        return self._chunk({"content": ""}, reason)

    def tool_call(self, name: str, arguments: str, index: int = 0,
                  call_id: str | None = None) -> list[bytes]:
        """A call's head (its id: random, as vLLM makes it, unless given) and its
        arguments 12 characters a fragment."""
        call_id = call_id or f"chatcmpl-tool-{uuid.uuid4().hex}"
        head = self._chunk({"tool_calls": [{"id": call_id,
                                            "type": "function", "index": index,
                                            "function": {"name": name, "arguments": ""}}]})
        parts = [arguments[i:i + 12] for i in range(0, len(arguments), 12)]
        return [head] + [self._chunk({"tool_calls": [{"index": index,
                                                      "function": {"arguments": p}}]})
                         for p in parts]

    def usage(self, prompt: int, completion: int, reasoning: int) -> bytes:
        """The usage chunk; an honest count: at least the token-bearing deltas built so
        far (a mode's own figure where it is larger), reasoning a part of it and at
        least its reasoning deltas (0 stays 0: a server that does not count them)."""
        completion = max(completion, self.tokens)
        reasoning = min(max(reasoning, self.thought) if reasoning else 0, completion)
        return self.usage_as_said(prompt, completion, reasoning)

    def usage_as_said(self, prompt: int, completion: int, reasoning: int) -> bytes:
        """The usage chunk with exactly these counts (a server whose accounting lies)."""
        obj = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
               "model": self.model, "choices": [],
               "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                         "completion_tokens": completion,
                         "completion_tokens_details": {"reasoning_tokens": reasoning}}}
        return b"data: " + orjson.dumps(obj) + b"\n\n"


DONE = b"data: [DONE]\n\n"

_CODE = re.compile(r"(?<![A-Za-z0-9])[A-Z0-9]{6,12}(?![A-Za-z0-9])")
_PLANS = ("free", "pro", "business", "enterprise")


@dataclass(frozen=True)
class Asked:
    """What a request asks, read as a competent model reads it: its codes (the account
    first) from the user's messages, and the plan its last paragraph names."""

    codes: tuple[str, ...]
    plan: str

    @property
    def account(self) -> str:
        return self.codes[0] if self.codes else "XEHM4B"


def asked(body: dict[str, Any]) -> Asked:
    users = [m.get("content") for m in body.get("messages") or []
             if isinstance(m, dict) and m.get("role") in ("user", "tool")
             and isinstance(m.get("content"), str)]
    codes: list[str] = []
    for text in users:
        for code in _CODE.findall(text):
            if any(ch.isdigit() for ch in code) and not code.isdigit() and code not in codes:
                codes.append(code)
    ask = users[-1].split("\n\n")[-1] if users else ""
    plan = next((p for p in _PLANS if re.search(rf"\b{p}\b", ask)), "business")
    return Asked(tuple(codes), plan)

#: Each behaviour of the fake and the (most severe) verdict a correct client gives it
#: on a tool turn: a request that offers tools and expects a tool call.
MODE_VERDICTS: dict[str, str] = {
    "ok": "ok",
    "answer": "no_tool_call",
    "stuck": "stuck_in_reasoning",
    "empty": "empty_content",
    "truncated": "truncated",
    "loop": "reasoning_loop",
    "leak": "token_leak",
    "args_loop": "tool_args_loop",
    "bad_args": "bad_tool_call",
    "unknown_tool": "bad_tool_call",
    "missing_keys": "bad_tool_call",
    "abort": "abnormal_finish",
    "http_500": "http_error",
    "http_502": "http_error",
    "http_503": "http_error",
    "http_429": "http_error",
    "http_429_bare": "http_error",
    "reset": "stream_error",
    "stall_first": "timeout",
    "stall_mid": "timeout",
    "slow_total": "timeout",
    "malformed_sse": "stream_error",
    "invalid_json": "stream_error",
    "no_done": "stream_error",
    "dup_done": "stream_error",
    "inband_error": "stream_error",
    "big_chunk": "ok",
    "non_utf8": "stream_error",
    "gzip": "ok",
    "close": "ok",
    "trickle": "ok",
    "slow_read": "ok",
    "invisible_stuck": "stuck_in_reasoning",
    "counted_loop": "reasoning_loop",
    "tool_name_repeated": "ok",
    "tool_no_index": "ok",
    "salad_reasoning": "garbled",
    "salad_content": "garbled",
    "salad_args": "garbled",
}

#: Replies with the right form and the wrong substance: what they are judged once the
#: workload knows each request's facts (`cross_talk` is judged across the run).
SUBSTANCE_MODES: dict[str, str] = {
    "cross_talk": "cross_talk",
    "other_question": "wrong_answer",
}


def _words(text: str) -> list[str]:
    return [w + " " for w in text.split()]


def _reasoning_tokens(text: str, limit: int) -> list[str]:
    out: list[str] = []
    for w in itertools.cycle(_words(text)):
        if len(out) >= limit:
            return out
        out.append(w)
    return out  # pragma: no cover


class FakeOpenAI:
    """The server's state: its plan, counters and knobs the tests turn."""

    def __init__(self, plan: Iterable[str] = ("ok",), model: str = MODEL,
                 max_model_len: int = 65536, token_delay_s: float = 0.0,
                 mode_by_text: dict[str, str] | None = None,
                 expose_start_time: bool = True, expose_server_id: bool = True,
                 version: str = "0.0.0-fake", root: str | None = None,
                 state_max_model_len: bool = True, route_health: bool = True) -> None:
        self.plan = list(plan)
        # A mode chosen by the request's own text: the same body, the same reply.
        self.mode_by_text = mode_by_text or {}
        self._next = itertools.cycle(self.plan)
        self.model = model
        self.release = version  # what /version answers
        self.root = root  # /v1/models' `root` of the model, as vLLM gives it
        self.max_model_len = max_model_len
        # Whether /v1/models states it (vLLM does; a proxy or another server may not):
        # the limit holds either way.
        self.state_max_model_len = state_max_model_len
        self.token_delay_s = token_delay_s
        self.counts: Counter[str] = Counter()
        self.healthy = True
        self.in_flight = 0
        self.max_in_flight = 0
        # Requests arrived and not yet answered in full: a request counts as under load
        # when another has arrived before it and is still open. `in_flight` alone would
        # miss the first wave, whose handlers all return before any stream starts.
        self.open_requests = 0
        self.bodies: list[dict[str, Any]] = []
        # What the requests in flight (and the last few finished) asked: the cross-talk
        # modes answer one request with another's facts.
        self.live: dict[object, Asked] = {}
        self.recent: list[Asked] = []
        # `scripted` mode: a function of the request (and this server) that writes the
        # reply, and what every request asked, in arrival order.
        self.script: Callable[[dict[str, Any], FakeOpenAI], dict[str, Any]] | None = None
        self.seen: list[Asked] = []
        # Speculative decoding as /metrics reports it (#51009: acceptance collapses under
        # load when `accepted_under_load` is set below 5).
        self.drafted = 0
        self.accepted = 0
        self.accepted_under_load = 5
        # Data-parallel engines behind this one URL, each its own label set on /metrics
        # (`engine="k"`); requests go round robin. Only `collapsing_engine` (when set)
        # accepts `accepted_under_load` under load, the others 5 of 7.
        self.engines = 1
        self.collapsing_engine: int | None = None
        #: When set, the first this many chat requests are the loaded ones and the rest
        #: come alone (a run's measured phase, then its reference phase), whatever a busy
        #: machine does to their overlap; None: loaded while another is open.
        self.loaded_requests: int | None = None
        self.engine_spec: dict[int, list[int]] = {}
        self.headers: list[dict[str, str]] = []
        # A "restart": a new process start time and server id, counters from zero, and
        # optionally a few failed readiness probes, as a restarted vLLM shows them.
        self.expose_start_time = expose_start_time
        # The dsv4-qual plugin's `dsv4_qual_server_info{server_id=...}`: which start this is.
        self.expose_server_id = expose_server_id
        self.server_id = uuid.uuid4().hex
        self.start_time = time.time()
        self.restarts = 0
        self.restart_at: int | None = None  # restart when this many chats have arrived
        self.restart_down_probes = 0
        self._down_probes = 0
        self._served_at_start = 0
        #: GET /tokenizer_info's document (None: 404, as vLLM without the flag).
        self.tokenizer_doc: dict[str, Any] | None = None
        # An ingress that routes only /v1 (and /metrics) answers /health with 404.
        self.app = Starlette(routes=[
            *([Route("/health", self.health)] if route_health else []),
            Route("/version", self.version),
            Route("/v1/models", self.models),
            Route("/metrics", self.metrics),
            Route("/tokenize", self.tokenize, methods=["POST"]),
            Route("/tokenizer_info", self.tokenizer_info),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
        ])

    # -- plain endpoints ------------------------------------------------------------

    def restart(self, down_probes: int = 0) -> None:
        self.start_time = max(time.time(), self.start_time + 2.0)
        self.server_id = uuid.uuid4().hex
        self.restarts += 1
        self._down_probes = down_probes
        self._served_at_start = sum(self.counts.values())
        self.drafted = self.accepted = 0
        self.engine_spec = {}

    async def health(self, request: Request) -> Response:
        if self._down_probes > 0:
            self._down_probes -= 1
            return Response(status_code=503)
        return Response(status_code=200 if self.healthy else 503)

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": self.release})

    async def models(self, request: Request) -> Response:
        if not self.healthy:
            return Response(status_code=503)
        return JSONResponse({"object": "list", "data": [
            {"id": self.model, "object": "model", "owned_by": "fake",
             **({"max_model_len": self.max_model_len} if self.state_max_model_len else {}),
             **({"root": self.root} if self.root else {})}]})

    async def metrics(self, request: Request) -> Response:
        served = sum(self.counts.values()) - self._served_at_start
        label = f'{{model_name="{self.model}"}}'
        lines = [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{label} {self.in_flight}",
            f"vllm:num_requests_waiting{label} 0",
            f"vllm:kv_cache_usage_perc{label} {min(1.0, self.in_flight / 16)}",
            f"vllm:num_preemptions_total{label} {served // 8}",
            f"vllm:prompt_tokens_total{label} {served * 300}",
            f"vllm:generation_tokens_total{label} {served * 10}",
            # 7 drafted tokens a request, 5 accepted alone: an acceptance rate of 5/7
            # (`accepted_under_load` of 7 while another request is in flight).
        ]
        if self.engines > 1:
            lines.append("# TYPE vllm:spec_decode_num_draft_tokens counter")
            lines += [f'vllm:spec_decode_num_draft_tokens_total{{engine="{k}",'
                      f'model_name="{self.model}"}} {self.engine_spec.get(k, [0, 0])[0]}'
                      for k in range(self.engines)]
            lines.append("# TYPE vllm:spec_decode_num_accepted_tokens counter")
            lines += [f'vllm:spec_decode_num_accepted_tokens_total{{engine="{k}",'
                      f'model_name="{self.model}"}} {self.engine_spec.get(k, [0, 0])[1]}'
                      for k in range(self.engines)]
        else:
            lines += [f"vllm:spec_decode_num_draft_tokens_total{label} {self.drafted}",
                      f"vllm:spec_decode_num_accepted_tokens_total{label} {self.accepted}"]
        if self.expose_start_time:
            lines.append(f"process_start_time_seconds {self.start_time}")
        if self.expose_server_id:
            lines.append(f'dsv4_qual_server_info{{server_id="{self.server_id}",'
                         f'address="127.0.0.1"}} 1')
        return PlainTextResponse("\n".join(lines) + "\n")

    async def tokenizer_info(self, request: Request) -> Response:
        """vLLM's description of its tokenizer, served only when a test sets one (vLLM
        serves it only under --enable-tokenizer-info-endpoint)."""
        if self.tokenizer_doc is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return JSONResponse(self.tokenizer_doc)

    async def tokenize(self, request: Request) -> Response:
        body = await request.json()
        text = body.get("prompt") or ""
        n = max(1, len(text) // 4)
        return JSONResponse({"count": n, "max_model_len": self.max_model_len,
                             "tokens": list(range(n))})

    # -- chat --------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        raw = await request.body()
        body = orjson.loads(raw)
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        mode = body.get("fake_mode") or self._mode_for(raw) or next(self._next)
        self.counts[mode] += 1
        engine = sum(self.counts.values()) % self.engines
        collapses = self.collapsing_engine is None or engine == self.collapsing_engine
        loaded = (self.open_requests > 0 if self.loaded_requests is None
                  else sum(self.counts.values()) <= self.loaded_requests)
        accepted = self.accepted_under_load if loaded and collapses else 5
        self.drafted += 7
        self.accepted += accepted
        slot = self.engine_spec.setdefault(engine, [0, 0])
        slot[0] += 7
        slot[1] += accepted
        self.open_requests += 1
        response = await self._answer(body, mode)
        if not isinstance(response, StreamingResponse) or not getattr(response, "tracked",
                                                                      False):
            self.open_requests -= 1
        return response

    async def _answer(self, body: dict[str, Any], mode: str) -> Response:
        if self.restart_at is not None and sum(self.counts.values()) == self.restart_at:
            self.restart(self.restart_down_probes)
        if body.get("model") != self.model:
            return JSONResponse({"error": {"message": f"The model `{body.get('model')}` "
                                           "does not exist.", "type": "NotFoundError",
                                           "code": 404}}, status_code=404)
        max_tokens = int(body.get("max_tokens") or 64)
        if max_tokens > self.max_model_len:
            return JSONResponse({"error": {
                "message": f"max_tokens={max_tokens} cannot be greater than "
                           f"max_model_len={self.max_model_len}.",
                "type": "BadRequestError", "code": 400}}, status_code=400)
        handler = getattr(self, "mode_" + mode.replace("-", "_"), None)
        if handler is None:
            return JSONResponse({"error": {"message": f"unknown fake_mode {mode}"}},
                                status_code=422)
        return await handler(body, max_tokens)

    def _mode_for(self, raw: bytes) -> str | None:
        for text, mode in self.mode_by_text.items():
            if text.encode() in raw:
                return mode
        return None

    def _stream(self, parts: AsyncIterator[bytes] | Iterable[bytes],
                headers: dict[str, str] | None = None) -> StreamingResponse:
        response = StreamingResponse(self._tracked(parts), media_type="text/event-stream",
                                     headers=headers)
        response.tracked = True  # type: ignore[attr-defined]  # `_tracked` closes the request
        return response

    async def _tracked(self, parts: AsyncIterator[bytes] | Iterable[bytes]
                       ) -> AsyncIterator[bytes]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        closed = False

        def close() -> None:
            nonlocal closed
            if not closed:
                closed = True
                self.in_flight -= 1
                self.open_requests -= 1

        try:
            if hasattr(parts, "__aiter__"):
                async for p in parts:  # type: ignore[union-attr]
                    yield p
            else:
                listed = list(parts)  # type: ignore[arg-type]
                for i, p in enumerate(listed):
                    if self.token_delay_s:
                        await asyncio.sleep(self.token_delay_s)
                    if i == len(listed) - 1:
                        # Closed before its last bytes go out: a client that has read
                        # them and sends again at once finds the server idle (alone).
                        close()
                    yield p
        finally:
            close()

    def _healthy_tool(self, body: dict[str, Any], *, name: str = "change_plan",
                      args: str | None = None, finish: str = "tool_calls",
                      reasoning_text: str | None = None, content: str = "") -> list[bytes]:
        c = Chunks(self.model)
        ask = asked(body)
        text = reasoning_text or HEALTHY_REASONING.format(acc=ask.account, plan=ask.plan)
        reasoning = [c.reasoning(w) for w in _words(text)]
        if args is None:
            args = orjson.dumps({"account_id": ask.account, "plan": ask.plan}).decode()
        calls = c.tool_call(name, args)
        said = [c.content(content)] if content else []
        return [c.role(), *reasoning, *said, *calls, c.finish(finish),
                c.usage(300, len(reasoning) + len(calls), len(reasoning)), DONE]

    async def mode_ok(self, body: dict[str, Any], max_tokens: int) -> Response:
        if body.get("tools"):
            return self._stream(self._healthy_tool(body))
        return await self.mode_answer(body, max_tokens)

    async def mode_answer(self, body: dict[str, Any], max_tokens: int) -> Response:
        c = Chunks(self.model)
        reasoning = [c.reasoning(w) for w in _words("Let me think about this briefly.")]
        ask = asked(body)
        said = (f"Account {ask.codes[0]}" + "".join(f", {code}" for code in ask.codes[1:])
                + ": " if ask.codes else "")
        content = [c.content(w) for w in _words(said + f"the account is now on the {ask.plan} "
                                                       "plan.")]
        return self._stream([c.role(), *reasoning, *content, c.finish("stop"),
                             c.usage(200, len(reasoning) + len(content), len(reasoning)), DONE])

    async def mode_stuck(self, body: dict[str, Any], max_tokens: int) -> Response:
        c = Chunks(self.model)
        toks = _reasoning_tokens(LOOP_SENTENCE, max_tokens)
        return self._stream([c.role(), *(c.reasoning(t) for t in toks), c.finish("length"),
                             c.usage(300, len(toks), len(toks)), DONE])

    async def mode_empty(self, body: dict[str, Any], max_tokens: int) -> Response:
        c = Chunks(self.model)
        toks = _words("I will think about it.")
        return self._stream([c.role(), *(c.reasoning(t) for t in toks), c.finish("stop"),
                             c.usage(300, len(toks), len(toks)), DONE])

    async def mode_truncated(self, body: dict[str, Any], max_tokens: int) -> Response:
        if body.get("tools"):  # the whole call came, then the cap: truncated, still usable
            return self._stream(self._healthy_tool(body, finish="length"))
        c = Chunks(self.model)
        content = _words("Sure. First I will upgrade the account and then I will")
        return self._stream([c.role(), c.reasoning("Upgrade first. "),
                             *(c.content(t) for t in content), c.finish("length"),
                             c.usage(300, len(content) + 1, 1), DONE])

    async def mode_loop(self, body: dict[str, Any], max_tokens: int) -> Response:
        if body.get("tools"):  # a looping reasoning that still ends in the right call
            return self._stream(self._healthy_tool(
                body, reasoning_text="".join(_reasoning_tokens(LOOP_SENTENCE, 200))))
        c = Chunks(self.model)
        toks = _reasoning_tokens(LOOP_SENTENCE, 200)
        return self._stream([c.role(), *(c.reasoning(t) for t in toks),
                             c.content("Done."), c.finish("stop"),
                             c.usage(300, len(toks) + 1, len(toks)), DONE])

    async def mode_leak(self, body: dict[str, Any], max_tokens: int) -> Response:
        if body.get("tools"):
            return self._stream(self._healthy_tool(body, content="Calling it.</think>"))
        c = Chunks(self.model)
        return self._stream([c.role(), c.reasoning("Upgrade it. "),
                             c.content("Upgrading now.</think><|im_end|>"), c.finish("stop"),
                             c.usage(300, 5, 1), DONE])

    # -- broken tool turns: each reply is useless to a tool-calling agent ----------------

    async def mode_args_loop(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Arguments that never close: a looping string value, cut by max_tokens."""
        head = '{"account_id": "XEHM4B", "plan": "business", "reason": "'
        args = head + "".join(_reasoning_tokens("the user wants the upgrade and ", max_tokens))
        return self._stream(self._healthy_tool(body, args=args, finish="length"))

    async def mode_bad_args(self, body: dict[str, Any], max_tokens: int) -> Response:
        return self._stream(self._healthy_tool(body, args="account_id=XEHM4B plan=business"))

    async def mode_unknown_tool(self, body: dict[str, Any], max_tokens: int) -> Response:
        return self._stream(self._healthy_tool(body, name="delete_account",
                                               args='{"account_id": "XEHM4B"}'))

    async def mode_missing_keys(self, body: dict[str, Any], max_tokens: int) -> Response:
        return self._stream(self._healthy_tool(body, args='{"account_id": "XEHM4B"}'))

    async def mode_abort(self, body: dict[str, Any], max_tokens: int) -> Response:
        """The engine aborted the request after the call: finish_reason abort."""
        return self._stream(self._healthy_tool(body, finish="abort"))

    async def mode_replay_reply(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Stream the reply the body names (`fake_reply`: reasoning, content, tool_calls,
        finish_reason), shaped as vLLM streams it."""
        reply = body.get("fake_reply") or {}
        c = Chunks(self.model)
        parts = [c.role()]
        parts += [c.reasoning(w) for w in _words(reply.get("reasoning") or "")]
        content = reply.get("content") or ""
        parts += [c.content(content[i:i + 40]) for i in range(0, len(content), 40)]
        for index, call in enumerate(reply.get("tool_calls") or []):
            parts += c.tool_call(call["function"]["name"], call["function"]["arguments"], index)
        parts += [c.finish(reply.get("finish_reason") or "stop"), c.usage(300, 100, 50), DONE]
        return self._stream(parts)

    async def _error(self, status: int, headers: dict[str, str] | None = None) -> Response:
        return JSONResponse({"error": {"message": f"injected {status}", "type": "Injected",
                                       "code": status}}, status_code=status, headers=headers)

    async def mode_http_500(self, body: dict[str, Any], max_tokens: int) -> Response:
        return await self._error(500)

    async def mode_http_502(self, body: dict[str, Any], max_tokens: int) -> Response:
        return Response(b"<html>502 Bad Gateway</html>", status_code=502,
                        media_type="text/html")

    async def mode_http_503(self, body: dict[str, Any], max_tokens: int) -> Response:
        return await self._error(503)

    async def mode_http_429(self, body: dict[str, Any], max_tokens: int) -> Response:
        return await self._error(429, {"retry-after": "1"})

    async def mode_http_429_bare(self, body: dict[str, Any], max_tokens: int) -> Response:
        return await self._error(429)

    async def mode_reset(self, body: dict[str, Any], max_tokens: int) -> Response:
        c = Chunks(self.model)

        async def parts() -> AsyncIterator[bytes]:
            yield c.role()
            yield c.reasoning("The user wants ")
            await asyncio.sleep(0.01)
            raise ConnectionResetError("injected reset mid-stream")

        return self._stream(parts())

    async def mode_stall_first(self, body: dict[str, Any], max_tokens: int) -> Response:
        await asyncio.sleep(float(body.get("fake_stall_s", 30)))
        return await self.mode_ok(body, max_tokens)

    async def mode_stall_mid(self, body: dict[str, Any], max_tokens: int) -> Response:
        c = Chunks(self.model)
        stall = float(body.get("fake_stall_s", 30))

        async def parts() -> AsyncIterator[bytes]:
            yield c.role()
            yield c.reasoning("The user wants ")
            await asyncio.sleep(stall)
            yield c.finish("stop")
            yield DONE

        return self._stream(parts())

    async def mode_slow_total(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Tokens keep coming (never idle) but the request runs past a total limit."""
        c = Chunks(self.model)
        gap = float(body.get("fake_gap_s", 0.05))
        count = int(body.get("fake_tokens", 200))

        async def parts() -> AsyncIterator[bytes]:
            yield c.role()
            for _ in range(count):
                await asyncio.sleep(gap)
                yield c.reasoning("hmm ")
            yield c.finish("length")
            yield DONE

        return self._stream(parts())

    async def mode_malformed_sse(self, body: dict[str, Any], max_tokens: int) -> Response:
        parts = self._healthy_tool(body)
        return self._stream([parts[0], b"this is not an sse line\n\n", *parts[1:]])

    async def mode_invalid_json(self, body: dict[str, Any], max_tokens: int) -> Response:
        parts = self._healthy_tool(body)
        return self._stream([parts[0], b'data: {"choices": [{"delta": \n\n', *parts[1:]])

    async def mode_no_done(self, body: dict[str, Any], max_tokens: int) -> Response:
        return self._stream(self._healthy_tool(body)[:-1])

    async def mode_dup_done(self, body: dict[str, Any], max_tokens: int) -> Response:
        return self._stream([*self._healthy_tool(body), DONE])

    async def mode_inband_error(self, body: dict[str, Any], max_tokens: int) -> Response:
        c = Chunks(self.model)
        err = orjson.dumps({"error": {"message": "engine dead", "type": "EngineDeadError",
                                      "code": 500}})
        return self._stream([c.role(), c.reasoning("The user "), b"data: " + err + b"\n\n",
                             DONE])

    async def mode_big_chunk(self, body: dict[str, Any], max_tokens: int) -> Response:
        c = Chunks(self.model)
        # 3 MB of text that is not a loop (a counting sequence).
        big = "".join(f"{i:08x} " for i in range(3 * 1024 * 1024 // 9))
        if body.get("tools"):
            return self._stream(self._healthy_tool(body, content=big))
        return self._stream([c.role(), c.reasoning("Long answer. "), c.content(big),
                             c.finish("stop"), c.usage(300, 2, 1), DONE])

    async def mode_non_utf8(self, body: dict[str, Any], max_tokens: int) -> Response:
        parts = self._healthy_tool(body)
        bad = b'data: {"choices":[{"index":0,"delta":{"reasoning":"\xff\xfe"}}]}\n\n'
        return self._stream([parts[0], bad, *parts[1:]])

    async def mode_gzip(self, body: dict[str, Any], max_tokens: int) -> Response:
        payload = gzip.compress(b"".join(self._healthy_tool(body)))
        return Response(payload, media_type="text/event-stream",
                        headers={"content-encoding": "gzip"})

    async def mode_close(self, body: dict[str, Any], max_tokens: int) -> Response:
        return self._stream(self._healthy_tool(body), headers={"connection": "close"})

    async def mode_trickle(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Sends the healthy reply a few bytes at a time (a slow writer)."""
        data = b"".join(self._healthy_tool(body))

        async def parts() -> AsyncIterator[bytes]:
            for i in range(0, len(data), 7):
                await asyncio.sleep(0.0005)
                yield data[i:i + 7]

        return self._stream(parts())

    async def mode_slow_read(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Answers normally, after taking its time (a server slow to read and reply)."""
        await asyncio.sleep(float(body.get("fake_stall_s", 0.5)))
        return await self.mode_ok(body, max_tokens)

    async def mode_nonstream(self, body: dict[str, Any], max_tokens: int) -> Response:
        return JSONResponse({
            "id": "chatcmpl-1", "object": "chat.completion", "model": self.model,
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "reasoning": "Upgrade first.",
                "tool_calls": [{"id": "t1", "type": "function", "function": {
                    "name": "change_plan",
                    "arguments": '{"account_id": "XEHM4B", "plan": "business"}'}}]}}],
            "usage": {"prompt_tokens": 300, "completion_tokens": 40, "total_tokens": 340,
                      "completion_tokens_details": {"reasoning_tokens": 4}}})

    # -- shapes that fooled the gate: a broken reply dressed up, an honest one dressed down

    async def mode_invisible_stuck(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Stuck in the reasoning until max_tokens, with a zero-width space as content."""
        c = Chunks(self.model)
        toks = _reasoning_tokens(LOOP_SENTENCE, max_tokens - 1)
        return self._stream([c.role(), *(c.reasoning(t) for t in toks), c.content("\u200b"),
                             c.finish("length"), c.usage(300, max_tokens, len(toks)), DONE])

    async def mode_counted_loop(self, body: dict[str, Any], max_tokens: int) -> Response:
        """A reasoning that restates one sentence with a counter, then answers."""
        looping = "".join(COUNTED_LOOP.format(i=i) for i in range(5, 35))
        if body.get("tools"):
            return self._stream(self._healthy_tool(body, reasoning_text=looping))
        c = Chunks(self.model)
        toks = _words(looping)
        return self._stream([c.role(), *(c.reasoning(t) for t in toks), c.content("Done."),
                             c.finish("stop"), c.usage(300, len(toks) + 1, len(toks)), DONE])

    def _fragments_reply(self, fragments: list[dict[str, Any]]) -> StreamingResponse:
        c = Chunks(self.model)
        text = HEALTHY_REASONING.format(acc="XEHM4B", plan="business")
        reasoning = [c.reasoning(w) for w in _words(text)]
        calls = [c._chunk({"tool_calls": [frag]}) for frag in fragments]
        return self._stream([c.role(), *reasoning, *calls, c.finish("tool_calls"),
                             c.usage(300, len(reasoning) + len(calls), len(reasoning)), DONE])

    async def mode_tool_name_repeated(self, body: dict[str, Any], max_tokens: int
                                      ) -> Response:
        """A healthy call whose every fragment repeats its index, id and function name."""
        args = orjson.dumps({"account_id": "XEHM4B", "plan": "business"}).decode()
        return self._fragments_reply([
            {"index": 0, "id": "call_0", "type": "function",
             "function": {"name": "change_plan", "arguments": args[i:i + 9]}}
            for i in range(0, len(args), 9)])

    async def mode_tool_no_index(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Two healthy calls whose continuation fragments carry no index; the second call
        is told apart by its new id only."""
        frags: list[dict[str, Any]] = []
        for call_id, name, arguments in (
                ("call_a", "get_account", {"account_id": "XEHM4B"}),
                ("call_b", "change_plan", {"account_id": "XEHM4B", "plan": "business"})):
            args = orjson.dumps(arguments).decode()
            frags.append({"id": call_id, "type": "function",
                          "function": {"name": name, "arguments": ""}})
            frags += [{"function": {"arguments": args[i:i + 7]}}
                      for i in range(0, len(args), 7)]
        return self._fragments_reply(frags)


    # -- replies with the right form and the wrong substance ---------------------------

    def _answer_for(self, body: dict[str, Any], ask: Asked, *, name: str = "change_plan",
                    args: dict[str, Any] | None = None) -> list[bytes]:
        """A fluent, well-formed reply to `body` built from `ask`'s facts."""
        c = Chunks(self.model)
        reasoning = [c.reasoning(w) for w in _words(
            HEALTHY_REASONING.format(acc=ask.account, plan=ask.plan))]
        if body.get("tools"):
            calls = c.tool_call(name, orjson.dumps(
                args if args is not None else {"account_id": ask.account,
                                                "plan": ask.plan}).decode())
            return [c.role(), *reasoning, *calls, c.finish("tool_calls"),
                    c.usage(300, len(reasoning) + len(calls), len(reasoning)), DONE]
        said = "".join(f"{code}, " for code in ask.codes)
        text = (f"Account and contract: {said}the usage grew steadily over the year, storage "
                "and egress dominate the invoices, and no payment is overdue.")
        content = [c.content(w) for w in _words(text)]
        return [c.role(), *reasoning, *content, c.finish("stop"),
                c.usage(300, len(reasoning) + len(content), len(reasoning)), DONE]

    async def mode_cross_talk(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Acts on (or answers with) another request's facts: one in flight at the same
        time when there is one, else the last one that finished."""
        mine = asked(body)
        key = object()
        self.live[key] = mine

        async def parts() -> AsyncIterator[bytes]:
            try:
                await asyncio.sleep(float(body.get("fake_overlap_s", 0.05)))
                others = [a for k, a in self.live.items() if k is not key
                          and a.account != mine.account]
                others = others or [a for a in self.recent if a.account != mine.account]
                for part in self._answer_for(body, others[-1] if others else mine):
                    yield part
            finally:
                self.live.pop(key, None)
                self.recent = [*self.recent[-7:], mine]

        return self._stream(parts())

    async def mode_other_question(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Answers fluently, on the request's own account, what it did not ask: cancels
        instead of changing the plan; summarizes without the facts it was asked for."""
        ask = asked(body)
        if body.get("tools"):
            return self._stream(self._answer_for(
                body, ask, name="cancel_subscription",
                args={"account_id": ask.account, "effective": "immediately"}))
        return self._stream(self._answer_for(body, Asked((), ask.plan)))


    def _not_alone(self, body: dict[str, Any],
                   reply: Callable[[bool], list[bytes]]) -> StreamingResponse:
        """Stream `reply(busy)`, where busy says whether another request was in flight
        while this one waited a moment (`fake_overlap_s`) before answering."""
        key = object()
        self.live[key] = asked(body)

        async def parts() -> AsyncIterator[bytes]:
            try:
                await asyncio.sleep(float(body.get("fake_overlap_s", 0.05)))
                for part in reply(len(self.live) > 1):
                    yield part
            finally:
                self.live.pop(key, None)

        return self._stream(parts())

    async def mode_drift_under_load(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Alone, the right call; with another request in flight, the same call on another
        plan (what a workload that knows no answers cannot see, but the server alone can)."""
        ask = asked(body)
        other = Asked(ask.codes, next(p for p in _PLANS if p != ask.plan))
        return self._not_alone(body, lambda busy: self._answer_for(body, other if busy
                                                                   else ask))

    async def mode_stuck_alone(self, body: dict[str, Any], max_tokens: int) -> Response:
        """The right call under load; alone, stuck in its reasoning until the cap (a server
        that fails alone too: its reference replies are no oracle, and count)."""
        c = Chunks(self.model)

        def reply(busy: bool) -> list[bytes]:
            if busy:
                return self._healthy_tool(body)
            tokens = [c.reasoning(LOOP_SENTENCE) for _ in range(max(1, max_tokens // 12))]
            return [c.role(), *tokens, c.finish("length"),
                    c.usage(300, max_tokens, max_tokens), DONE]

        return self._not_alone(body, reply)

    async def mode_error_alone(self, body: dict[str, Any], max_tokens: int) -> Response:
        """The right call under load; alone, HTTP 500."""
        if self.open_requests <= 1:
            await asyncio.sleep(float(body.get("fake_overlap_s", 0.05)))
            if self.open_requests <= 1:
                return await self._error(500)
        return self._stream(self._healthy_tool(body))

    async def mode_reword_under_load(self, body: dict[str, Any], max_tokens: int) -> Response:
        """The same call always; the reasoning worded differently when not alone (a server
        that is not batch-invariant)."""
        ask = asked(body)

        def reply(busy: bool) -> list[bytes]:
            c = Chunks(self.model)
            text = HEALTHY_REASONING.format(acc=ask.account, plan=ask.plan)
            if busy:
                text = "So: " + text.replace("I should", "I will")
            reasoning = [c.reasoning(w) for w in _words(text)]
            calls = c.tool_call("change_plan", orjson.dumps(
                {"account_id": ask.account, "plan": ask.plan}).decode())
            return [c.role(), *reasoning, *calls, c.finish("tool_calls"),
                    c.usage(300, len(reasoning) + len(calls), len(reasoning)), DONE]

        return self._not_alone(body, reply)

    # -- token salad with a clean finish (a row that read another request's KV) -----------

    def _salad(self, mode: str) -> str:
        """Multilingual sub-word soup, one of four fixed samples by arrival order."""
        return salad.multilingual(self.counts[mode] % 4, 80)

    async def mode_salad_reasoning(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Salad in the reasoning, then the right call, well formed."""
        return self._stream(self._healthy_tool(
            body, reasoning_text=self._salad("salad_reasoning")))

    async def mode_salad_content(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Salad as the answer, finished by `stop`."""
        c = Chunks(self.model)
        text = self._salad("salad_content")
        content = [c.content(text[i:i + 8]) for i in range(0, len(text), 8)]
        return self._stream([c.role(), c.reasoning("Answer now. "), *content, c.finish("stop"),
                             c.usage(300, len(content) + 1, 1), DONE])

    async def mode_salad_args(self, body: dict[str, Any], max_tokens: int) -> Response:
        """The right function with every required key, the values salad: the JSON parses."""
        args = orjson.dumps({"account_id": "XEHM4B", "plan": self._salad("salad_args")})
        return self._stream(self._healthy_tool(body, args=args.decode()))

    async def mode_garble_when_busy(self, body: dict[str, Any], max_tokens: int) -> Response:
        """Clean with nothing else in flight; with others in flight, token salad of a kind
        that changes request by request in the reasoning, then the right call: the bug's
        face that only concurrency shows (#48089: 0 of 20 bad alone)."""
        kinds = ("multilingual", "special_burst", "bpe_markers", "glued", "mojibake")
        kind = kinds[self.counts["garble_when_busy"] % len(kinds)]
        soup = getattr(salad, kind)(self.counts["garble_when_busy"], 80)
        return self._not_alone(body, lambda busy: self._healthy_tool(
            body, reasoning_text=soup if busy else None))

    async def mode_scripted(self, body: dict[str, Any], max_tokens: int) -> Response:
        """The reply `self.script(body, self)` writes (reasoning, content, tool_calls,
        finish_reason): a server built for one test, what it saw of earlier requests in
        `self.seen` (every request's `Asked`, in arrival order)."""
        ask = asked(body)
        reply = self.script(body, self) if self.script is not None else {}
        self.seen.append(ask)
        return await self.mode_replay_verbatim({**body, "fake_reply": reply}, max_tokens)

    async def mode_replay_verbatim(self, body: dict[str, Any], max_tokens: int) -> Response:
        """`replay_reply` with the reasoning streamed as it is (its newlines and spaces
        kept), for replies whose layout is part of what is judged."""
        reply = body.get("fake_reply") or {}
        c = Chunks(self.model)
        parts = [c.role()]
        if reply.get("deltas") is not None:
            # The deltas in the order given, one event each: a stream whose order is
            # what is judged (a run replayed, reasoning after the answer began).
            send = {"reasoning": c.reasoning, "content": c.content}
            parts += [send[field](text) for field, text in reply["deltas"]]
        else:
            for field, chunk in (("reasoning", c.reasoning), ("content", c.content)):
                text = reply.get(field) or ""
                parts += [chunk(text[i:i + 40]) for i in range(0, len(text), 40)]
        ids = reply.get("call_ids") or []
        for index, call in enumerate(reply.get("tool_calls") or []):
            parts += c.tool_call(call["function"]["name"], call["function"]["arguments"], index,
                                 ids[index] if index < len(ids) else None)
        usage = reply.get("usage")
        parts += [c.finish(reply.get("finish_reason") or "stop"),
                  c.usage(300, 100, 50) if usage is None else c.usage_as_said(300, *usage),
                  DONE]
        return self._stream(parts)


class QuickStopServer(uvicorn.Server):
    """uvicorn looks at `should_exit` every 0.1 s, and at its open connections every
    0.1 s while it stops; the suite stops a few hundred servers, so this one looks every
    10 ms (what it serves, and what it waits for, are unchanged)."""

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            await asyncio.sleep(0.01)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop as uvicorn stops (listen no more, ask each connection to close, wait for
        them up to `timeout_graceful_shutdown`, then cancel what is left), looking every
        10 ms where uvicorn first sleeps a tenth of a second: a few hundred stops a run
        of the suite."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        deadline = time.monotonic() + (self.config.timeout_graceful_shutdown or 0.3)
        while (self.server_state.connections or self.server_state.tasks) \
                and not self.force_exit and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for task in self.server_state.tasks:
            task.cancel()
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()


class ServerThread:
    """uvicorn on 127.0.0.1 with an ephemeral port, in a daemon thread."""

    def __init__(self, app: Any, port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        # A stalled stream (the fault modes sleep for 30 s) must not hold stop() for
        # long: a test stops its server once its run is over, so what is still open
        # then is cancelled after 0.3 s.
        config = uvicorn.Config(app, log_level="critical", lifespan="off",
                                timeout_keep_alive=30, timeout_graceful_shutdown=0.3)
        self.server = QuickStopServer(config)
        self.thread = threading.Thread(target=self.server.run,
                                       kwargs={"sockets": [self.sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    def crash(self) -> None:
        """Go away like a killed server: open streams are cut, not finished."""
        self.server.force_exit = True
        self.stop()
