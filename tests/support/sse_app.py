"""A tiny ASGI app that streams one chat reply as server-sent events, for the transport
conformance suite's real servers (uvicorn with h11 or httptools, hypercorn, nginx in
front): `POST /v1/chat/completions` answers with the events of `PAYLOADS`, one ASGI
message (so one HTTP chunk) per event, written as the request's `wire` field says:

  plain         as they are
  gzip          one gzip member, flushed after every event (how a compressing gateway
                streams: each event decodes as it comes)
  gzip_members  every event its own gzip member
  deflate       zlib-wrapped deflate, flushed after every event
  deflate_raw   raw deflate (no zlib header), flushed after every event
  length        the whole stream at once, with a Content-Length

The app compresses whatever the request's Accept-Encoding says: a gateway may, and the
raw transport sends none.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from loadgen.workload.tools import BILLING_TOOLS
from tests.support.openai_fake import MODEL, FakeOpenAI
from tests.support.wire import payloads_of

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]

BODY = {"model": MODEL, "messages": [{"role": "user", "content":
        "Move account XEHM4B to the business plan."}], "max_tokens": 64, "stream": True,
        "tools": BILLING_TOOLS}
#: The data of each event: a healthy tool turn as the fake streams it, `[DONE]` last.
PAYLOADS = payloads_of(b"".join(FakeOpenAI()._healthy_tool(BODY)))
WIRES = ("plain", "gzip", "gzip_members", "deflate", "deflate_raw", "length")


def _events(wire: str) -> tuple[list[bytes], bytes | None]:
    """The body's pieces as sent, and its Content-Encoding."""
    events = [b"data: " + p + b"\n\n" for p in PAYLOADS]
    if wire in ("plain", "length"):
        return (events if wire == "plain" else [b"".join(events)]), None
    if wire == "gzip_members":
        return [gzip.compress(e, mtime=0) for e in events], b"gzip"
    packer = zlib.compressobj(wbits={"gzip": 31, "deflate": 15, "deflate_raw": -15}[wire])
    pieces = [packer.compress(e) + packer.flush(zlib.Z_SYNC_FLUSH) for e in events]
    pieces[-1] += packer.flush()
    return pieces, b"deflate" if wire.startswith("deflate") else b"gzip"


async def app(scope: Scope, receive: Callable[[], Awaitable[Message]],
              send: Callable[[Message], Awaitable[None]]) -> None:
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]
            if kind == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif kind == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] != "/v1/chat/completions":
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        return
    pieces, coding = _events(orjson.loads(body).get("wire", "plain"))
    headers = [(b"content-type", b"text/event-stream; charset=utf-8"),
               (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
    if coding:
        headers.append((b"content-encoding", coding))
    if len(pieces) == 1:
        headers.append((b"content-length", b"%d" % len(pieces[0])))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for piece in pieces:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
