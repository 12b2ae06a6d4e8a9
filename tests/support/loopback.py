"""A throwaway TCP server on 127.0.0.1 for tests that write HTTP bytes by hand.

The transport tests answer each request with bytes of their own choosing (a framing, a
defect, a cut), so they serve with asyncio's bare streams rather than an HTTP server
that would frame the reply its own way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request off the connection: its head and its body (by its Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, (await reader.readexactly(length) if length else b"")


async def with_server(handler: Handler, body: Callable[[str], Awaitable[None]]) -> list[int]:
    """Run `body(url)` against a server whose connections `handler` answers; the
    connections it accepted, by number. A connection the client drops ends quietly."""
    accepted: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(len(accepted))
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        await body(f"http://127.0.0.1:{port}")
    finally:
        server.close()
    return accepted
