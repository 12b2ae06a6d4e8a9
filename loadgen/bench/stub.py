"""A minimal, fast OpenAI-compatible streaming stub for benchmarking the client.

Raw asyncio protocol, HTTP/1.1 keep-alive, chunked SSE: the stub must cost far less
CPU per request than the client it measures, or the benchmark measures the stub.
Each reply is a healthy tool-call-shaped stream: reasoning tokens, a tool call,
finish_reason, usage, [DONE]; or (`answer` shape) reasoning tokens and an answer in
prose, finished by `stop`, so the judge's checks of answers in prose run too. `burst`
writes the whole stream at once; `paced` writes one token every `token_interval_s`.
"""

from __future__ import annotations

import asyncio
import os
import sys

import orjson

from loadgen.bench.prose import prose_words

MODEL = "bench-stub"


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    obj = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
           "model": MODEL, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                        "finish_reason": finish}]}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _http_chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


ANSWER = ("The value you asked for is the one stated in the conversation, "
          "written out in full here.").split()


def build_events(tokens: int, shape: str = "tool") -> list[bytes]:
    """SSE events of one reply with `tokens` generated tokens (each a chunk)."""
    events = [_chunk({"role": "assistant", "content": ""})]
    reasoning = max(1, tokens - (len(ANSWER) if shape == "answer" else 8))
    # Healthy reasoning: honest prose, judged `ok` (random words from a short list would
    # rightly be token salad, and a short repeated text a loop). Longer replies go round
    # the ~1,000 words again: a unit too long to be a loop.
    words = prose_words()
    events += [_chunk({"reasoning": words[i % len(words)] + " "}) for i in range(reasoning)]
    if shape == "answer":
        events += [_chunk({"content": word + " "}) for word in ANSWER[:tokens - reasoning]]
        events.append(_chunk({"content": ""}, "stop"))
        events.append(_usage(tokens, reasoning))
        events.append(b"data: [DONE]\n\n")
        return events
    events.append(_chunk({"tool_calls": [{"id": "call_1", "type": "function", "index": 0,
                                          "function": {"name": "change_plan",
                                                       "arguments": ""}}]}))
    args = '{"account_id": "XEHM4B", "plan": "business"}'
    parts = [args[i:i + 7] for i in range(0, len(args), 7)]
    for i in range(tokens - reasoning - 1):
        frag = parts[i] if i < len(parts) else ""
        events.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": frag}}]}))
    rest = "".join(parts[tokens - reasoning - 1:])
    if rest:
        events.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": rest}}]}))
    events.append(_chunk({"content": ""}, "tool_calls"))
    events.append(_usage(tokens, reasoning))
    events.append(b"data: [DONE]\n\n")
    return events


def _usage(tokens: int, reasoning: int) -> bytes:
    usage = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
             "model": MODEL, "choices": [],
             "usage": {"prompt_tokens": 300, "completion_tokens": tokens,
                       "total_tokens": 300 + tokens,
                       "completion_tokens_details": {"reasoning_tokens": reasoning}}}
    return b"data: " + orjson.dumps(usage) + b"\n\n"


_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
         b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n")
_MODELS = orjson.dumps({"object": "list", "data": [
    {"id": MODEL, "object": "model", "max_model_len": 65536}]})


def _plain(status: bytes, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: " + ctype +
            b"\r\ncontent-length: %d\r\n\r\n" % len(body) + body)


class StubProtocol(asyncio.Protocol):
    def __init__(self, burst: bytes, events: list[bytes], interval: float) -> None:
        self.burst = burst
        self.events = events
        self.interval = interval
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_event_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end]
            length = 0
            lower = head.lower()
            i = lower.find(b"content-length:")
            if i >= 0:
                j = lower.find(b"\r\n", i)
                length = int(lower[i + 15:j if j >= 0 else len(lower)])
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length:]
            self._respond(head.split(b" ", 2)[1])

    def _respond(self, path: bytes) -> None:
        t = self.transport
        assert t is not None
        if path.startswith(b"/v1/chat/completions"):
            if self.interval <= 0:
                t.write(self.burst)
            else:
                t.write(_HEAD)
                self._paced(0)
        elif path.startswith(b"/v1/models"):
            t.write(_plain(b"200 OK", _MODELS))
        elif path.startswith(b"/health"):
            t.write(_plain(b"200 OK", b""))
        else:
            t.write(_plain(b"404 Not Found", b"{}"))

    def _paced(self, i: int) -> None:
        t = self.transport
        if t is None or t.is_closing():
            return
        if i < len(self.events):
            t.write(_http_chunk(self.events[i]))
            self.loop.call_later(self.interval, self._paced, i + 1)
        else:
            t.write(b"0\r\n\r\n")

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(port: int, tokens: int, interval: float, ready_fd: int | None,
                shape: str = "tool") -> None:
    events = build_events(tokens, shape)
    burst = _HEAD + b"".join(_http_chunk(e) for e in events) + b"0\r\n\r\n"
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: StubProtocol(burst, events, interval),
                                      "127.0.0.1", port, backlog=4096)
    actual = server.sockets[0].getsockname()[1]
    if ready_fd is not None:
        os.write(ready_fd, b"%d\n" % actual)
        os.close(ready_fd)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    port, tokens, interval = int(argv[0]), int(argv[1]), float(argv[2])
    ready_fd = int(argv[3]) if len(argv) > 3 and argv[3] != "-" else None
    shape = argv[4] if len(argv) > 4 else "tool"
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(port, tokens, interval, ready_fd, shape))


if __name__ == "__main__":
    main(sys.argv[1:])
