"""The sim's OpenAI-compatible HTTP API, shaped like vLLM 0.27+.

Streaming chunks carry reasoning in `delta.reasoning`, content in `delta.content`,
tool calls as `delta.tool_calls` fragments (id/type/name first, then arguments),
`finish_reason` stop / length / tool_calls on the last choice chunk, and, with
`stream_options.include_usage`, a final usage chunk with reasoning tokens. Errors
use vLLM's wording and status codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from server_patch.receipts import tool_version
from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine, SimRequest
from server_patch.sim.metrics import render_metrics
from server_patch.sim.model import Reply, count_tokens, make_script, render_prompt, tokenize


def _error(status: int, message: str, kind: str, param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": status}}, status_code=status)


class SimApp:
    def __init__(self, cfg: SimConfig, engine: Engine, guard_snapshot: Any = None) -> None:
        self.cfg = cfg
        self.engine = engine
        self.guard_snapshot = guard_snapshot
        self.on_shutdown: Any = None  # e.g. the guard's last flush into the receipt
        self.server_start: dict[str, Any] | None = None  # the start /metrics names
        self._engine_task: asyncio.Task[None] | None = None
        self.app = Starlette(
            routes=[
                Route("/health", self.health),
                Route("/version", self.version),
                Route("/v1/models", self.models),
                Route("/metrics", self.metrics),
                Route("/tokenize", self.tokenize, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self._engine_task = asyncio.get_running_loop().create_task(self.engine.run())
        try:
            yield
        finally:
            self.engine.close()
            self._engine_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._engine_task
            if self.on_shutdown is not None:
                self.on_shutdown()

    async def health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": f"dsv4-qual-sim {tool_version()}",
                             "c128a_layout": self.cfg.layout,
                             "cudagraph_mode": self.cfg.graph_mode,
                             "prefix_caching": self.cfg.prefix_caching,
                             "indexer": self.cfg.indexer})

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{
            "id": self.cfg.model, "object": "model", "created": 0, "owned_by": "dsv4-qual",
            "root": self.cfg.model, "parent": None, "max_model_len": self.cfg.max_model_len}]})

    async def metrics(self, request: Request) -> Response:
        guard = self.guard_snapshot() if self.guard_snapshot else None
        text = render_metrics(self.cfg, self.engine, guard, self.server_start)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def tokenize(self, request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error(400, "body is not JSON", "BadRequestError")
        if "messages" in body:
            text = render_prompt(body["messages"], body.get("tools"))
        else:
            text = str(body.get("prompt", ""))
        n = count_tokens(text)
        return JSONResponse({"count": n, "max_model_len": self.cfg.max_model_len,
                             "tokens": list(range(n))})

    async def chat(self, request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error(400, "body is not JSON", "BadRequestError")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "messages: field required", "BadRequestError", "messages")
        model = body.get("model", self.cfg.model)
        if model != self.cfg.model:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        if body.get("n", 1) != 1:
            return _error(400, "n > 1 is not supported by the sim", "BadRequestError", "n")
        tools = body.get("tools") or None
        kwargs = body.get("chat_template_kwargs")
        thinking = not (isinstance(kwargs, dict) and kwargs.get("thinking") is False)
        tokens = tokenize(render_prompt(body["messages"], tools))
        prompt = len(tokens)
        limit = self.cfg.max_model_len
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or (
            limit - prompt)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return _error(400, f"max_tokens must be at least 1, got {max_tokens}.",
                          "BadRequestError", "max_tokens")
        if max_tokens > limit:
            return _error(400, f"max_tokens={max_tokens} cannot be greater than "
                          f"max_model_len={limit}. Please request fewer output tokens.",
                          "BadRequestError", "max_tokens")
        if prompt + max_tokens > limit:
            return _error(400, f"This model's maximum context length is {limit} tokens. "
                          f"However, you requested {prompt + max_tokens} tokens ({prompt} in "
                          f"the messages, {max_tokens} in the completion). Please reduce the "
                          "length of the messages or completion.", "BadRequestError")
        reply = Reply(make_script(body["messages"], tools, self.cfg.seed, thinking), max_tokens)
        sim_request = self.engine.new_request(prompt, reply, tokens)
        self.engine.add(sim_request)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(self._stream(sim_request, prompt, usage),
                                     media_type="text/event-stream")
        return await self._complete(sim_request, prompt)

    async def _stream(self, r: SimRequest, prompt: int, include_usage: bool
                      ) -> AsyncIterator[bytes]:
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        model = self.cfg.model
        head = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                      "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = None
            return b"data: " + orjson.dumps({**head, "choices": [choice]}) + b"\n\n"

        call_id = f"chatcmpl-tool-{uuid.uuid4().hex[:16]}"
        try:
            yield chunk({"role": "assistant", "content": ""})
            while True:
                piece = await r.queue.get()
                if piece is None:
                    break
                if piece.channel == "reasoning":
                    yield chunk({"reasoning": piece.text})
                elif piece.channel == "content":
                    yield chunk({"content": piece.text})
                elif piece.channel == "tool_name":
                    yield chunk({"tool_calls": [{"id": call_id, "type": "function", "index": 0,
                                                 "function": {"name": piece.text,
                                                              "arguments": ""}}]})
                elif piece.channel == "tool_args":
                    yield chunk({"tool_calls": [{"index": 0,
                                                 "function": {"arguments": piece.text}}]})
            yield chunk({"content": ""}, r.reply.finish_reason)
            if include_usage:
                yield b"data: " + orjson.dumps({**head, "choices": [],
                                                "usage": self._usage(r, prompt)}) + b"\n\n"
            yield b"data: [DONE]\n\n"
        finally:
            self.engine.abort(r)

    def _usage(self, r: SimRequest, prompt: int) -> dict[str, Any]:
        details = {"cached_tokens": r.cached} if self.engine.pool.cache is not None else None
        return {"prompt_tokens": prompt, "total_tokens": prompt + r.reply.generated,
                "completion_tokens": r.reply.generated, "prompt_tokens_details": details,
                "completion_tokens_details": {"reasoning_tokens": r.reply.reasoning_tokens}}

    async def _complete(self, r: SimRequest, prompt: int) -> Response:
        reasoning: list[str] = []
        content: list[str] = []
        name, args = None, []
        try:
            while True:
                piece = await r.queue.get()
                if piece is None:
                    break
                if piece.channel == "reasoning":
                    reasoning.append(piece.text)
                elif piece.channel == "content":
                    content.append(piece.text)
                elif piece.channel == "tool_name":
                    name = piece.text
                elif piece.channel == "tool_args":
                    args.append(piece.text)
        finally:
            self.engine.abort(r)
        tool_calls = [{"id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}", "type": "function",
                       "function": {"name": name, "arguments": "".join(args)}}] if name else []
        message = {"role": "assistant", "content": "".join(content) or None,
                   "reasoning": "".join(reasoning) or None, "tool_calls": tool_calls}
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
            "created": int(time.time()), "model": self.cfg.model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": r.reply.finish_reason, "stop_reason": None}],
            "usage": self._usage(r, prompt)})
