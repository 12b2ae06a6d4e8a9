"""Kept connections across think time: retired before the server's keep-alive runs out,
and a kept one the server closed under a request is a transport retry, never a failure.

vLLM (uvicorn) closes a connection idle for 5 s and logs nothing. A session that thinks
longer and reuses its socket sends into a closing connection: the reply never comes and
the server never saw the request. Real servers below, on every transport.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
import pytest

from loadgen.engine.client import ChatClient, Timeouts
from loadgen.engine.transport import make_http_client
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

TIMEOUTS = Timeouts(connect=2.0, first_token=2.0, idle=2.0, total=5.0)
REPLY = (b'data: {"choices":[{"index":0,"delta":{"content":"The code is QK7T2ZP4."},'
         b'"finish_reason":null}]}\n\n'
         b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
         b"data: [DONE]\n\n")


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


async def _request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    await reader.readexactly(length)


Behaviour = Callable[[int, int], str]  # (connection number, request on it) -> what to do


async def _serve(behaviour: Behaviour, body: Callable[[str], Awaitable[None]]) -> list[int]:
    """A server that answers, or reads a request and closes without a byte ("close"), as
    `behaviour` says; the requests it answered per connection."""
    answered: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = len(answered)
        answered.append(0)
        try:
            while True:
                await _request(reader)
                if behaviour(number, answered[number]) == "close":
                    writer.transport.abort()  # RST, not a word: what a closing server does
                    return
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n" + _chunked(REPLY))
                await writer.drain()
                answered[number] += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        await body(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    finally:
        server.close()
    return answered


def _record(url: str) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0, endpoint=url,
                         item_id="i")


async def _two(url: str, transport: str, idle_s: float, pause: float) -> list[RequestRecord]:
    body = orjson.dumps({"model": "m", "messages": [], "stream": True})
    out = []
    async with make_http_client(transport, 4, True, 2.0, idle_s) as http:
        client = ChatClient(http, TIMEOUTS)
        for i in range(2):
            if i:
                await asyncio.sleep(pause)
            record = _record(url)
            await client.send(record, body, True)
            record.verdicts = classify(record, VerdictConfig())
            out.append(record)
    return out


@pytest.mark.parametrize("transport", ["raw", "aiohttp", "httpx"])
def test_a_connection_idle_past_the_expiry_is_not_reused(transport: str) -> None:
    records: list[RequestRecord] = []

    async def body(url: str) -> None:
        records.extend(await _two(url, transport, idle_s=0.2, pause=0.4))

    answered = asyncio.run(_serve(lambda conn, n: "answer", body))
    assert [r.verdicts for r in records] == [["ok"], ["ok"]]
    assert answered == [1, 1]  # the second request went on a new connection


@pytest.mark.parametrize("transport", ["raw", "aiohttp", "httpx"])
def test_a_kept_connection_is_reused_within_the_expiry(transport: str) -> None:
    async def body(url: str) -> None:
        await _two(url, transport, idle_s=5.0, pause=0.05)

    assert asyncio.run(_serve(lambda conn, n: "answer", body)) == [2]


@pytest.mark.parametrize("transport", ["raw", "aiohttp", "httpx"])
def test_a_kept_connection_closed_under_the_request_is_retried_once(transport: str) -> None:
    """The server closes the kept connection as the second request arrives, before a byte
    of the reply: the request goes again on a new connection, and the record says so."""
    records: list[RequestRecord] = []

    async def body(url: str) -> None:
        records.extend(await _two(url, transport, idle_s=5.0, pause=0.05))

    answered = asyncio.run(_serve(lambda conn, n: "close" if conn == 0 and n == 1
                                  else "answer", body))
    first, second = records
    assert first.transport_retry is None and second.verdicts == ["ok"], second.error
    assert second.transport_retry and second.content == "The code is QK7T2ZP4."
    assert answered == [1, 1]


def test_a_new_connection_closed_without_a_reply_is_a_failure_not_a_retry() -> None:
    """Only a kept connection may have been closed by its keep-alive: a new one that
    breaks before the reply is the server's failure (raw transport, which knows)."""
    records: list[RequestRecord] = []

    async def body(url: str) -> None:
        records.extend(await _two(url, "raw", idle_s=5.0, pause=0.05))

    asyncio.run(_serve(lambda conn, n: "close", body))
    assert all(r.verdicts == ["stream_error"] and r.transport_retry is None for r in records)


def test_a_second_failure_after_the_retry_is_the_servers() -> None:
    records: list[RequestRecord] = []

    async def body(url: str) -> None:
        records.extend(await _two(url, "raw", idle_s=5.0, pause=0.05))

    asyncio.run(_serve(lambda conn, n: "close" if conn > 0 or n == 1 else "answer", body))
    second = records[1]
    assert second.transport_retry and second.verdicts == ["stream_error"]
