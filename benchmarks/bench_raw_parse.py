"""Client CPU of the raw transport's parsing alone: one 64-token streamed reply (70 HTTP
chunks, as vLLM sends them) read from a stream that holds it whole, head and body, as
one socket read brings it. No server and no event-loop wake-ups: the figure is the
parser's, which end-to-end runs (`dsv4-qual bench-client`) bury in the judge's and the
loop's cost and in a shared machine's noise.

    python benchmarks/bench_raw_parse.py

Run it in another checkout to compare trees: the module it times is the one on
`sys.path`. The tree before llhttp (d88b56a) returned the head from `_read_head` and
took the framing as `_Body`'s arguments; both shapes are read.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from loadgen.engine import raw_http

EVENTS = [b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,'
          b'"model":"m","choices":[{"index":0,"delta":{"content":"tok%d "},'
          b'"finish_reason":null}]}\n\n' % i for i in range(68)]
EVENTS += [b'data: {"usage":{"prompt_tokens":10,"completion_tokens":64}}\n\n',
           b"data: [DONE]\n\n"]
WIRE = (b"HTTP/1.1 200 OK\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\nserver: uvicorn\r\n"
        b"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS) + b"0\r\n\r\n")


class _Writer:
    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


class _Pool:
    def release(self, *_: Any) -> None:
        pass

    def forget(self) -> None:
        pass


async def _one() -> int:
    reader = asyncio.StreamReader()
    reader.feed_data(WIRE)
    reader.feed_eof()
    conn: Any = raw_http._Connection(reader, _Writer())  # type: ignore[arg-type]
    make: Any = raw_http._Body
    if hasattr(conn, "expect_reply"):  # llhttp: the head is the connection's state
        await raw_http._read_head(conn, None)
        body = make(_Pool(), ("http", "stub", 80), conn, None)
    else:  # the hand parser before it
        await raw_http._read_head(conn, None)
        body = make(_Pool(), ("http", "stub", 80), conn, None, True, True, None)
    size = sum([len(piece) async for piece in body])
    await body.aclose()
    return size


async def _main(replies: int = 3000, rounds: int = 5) -> None:
    size = await _one()
    figures = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(replies):
            await _one()
        figures.append((time.process_time() - started) / replies * 1e6)
    print(f"{raw_http.__file__}: {len(WIRE)} bytes on the wire, {size} of body; "
          f"CPU us per reply {', '.join(f'{f:.1f}' for f in figures)} "
          f"(median {statistics.median(figures):.1f})")


if __name__ == "__main__":
    asyncio.run(_main())
