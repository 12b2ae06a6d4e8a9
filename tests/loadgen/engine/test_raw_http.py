"""The raw HTTP/1.1 transport against servers that write exactly the bytes a test says.

The fault matrix (tests/loadgen/engine/test_client.py) runs every misbehaving-server mode
through it like the other transports; these tests pin what only bytes on the wire show:
how bodies are framed, when a connection is kept, and which httpx error each fault is.
"""

from __future__ import annotations

import asyncio
import random

import httpx
import pytest

from loadgen.engine.raw_http import RawTransport
from tests.support.loopback import read_request, with_server


async def _write_in_cuts(writer: asyncio.StreamWriter, wire: bytes, rng: random.Random,
                         most: int) -> None:
    """The wire written in random cuts of 1 to `most` - 1 bytes, each drained."""
    at = 0
    while at < len(wire):
        step = rng.randrange(1, most)
        writer.write(wire[at:at + step])
        await writer.drain()
        at += step


def _chunked(pieces: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


def test_chunks_cut_anywhere_come_back_whole() -> None:
    """Generated bodies, written in random cuts (mid size line, mid CRLF, mid data)."""
    rng = random.Random(7)
    cases = [[bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 7, 300, 70_000))))
              or b"x" for _ in range(rng.randrange(1, 40))] for _ in range(25)]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for pieces in cases:
            (await read_request(reader))[0]
            await _write_in_cuts(writer, CHUNKED_HEAD + _chunked(pieces), rng, 5000)

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            for pieces in cases:
                resp = await http.get(url)
                assert resp.content == b"".join(pieces)

    accepted = asyncio.run(with_server(handler, body))
    assert accepted == [0]  # one kept connection for all 25 responses


@pytest.mark.parametrize("framing", ["length", "close"])
def test_content_length_and_read_to_close_bodies(framing: str) -> None:
    payload = b'{"data": [1, 2, 3]}' * 100

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            (await read_request(reader))[0]
            if framing == "length":
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(payload), payload))
                await writer.drain()
            else:
                writer.write(b"HTTP/1.0 200 OK\r\n\r\n" + payload)
                await writer.drain()
                return  # the body ends with the connection

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            for _ in range(3):
                assert (await http.get(url)).content == payload

    accepted = asyncio.run(with_server(handler, body))
    assert len(accepted) == (1 if framing == "length" else 3)


def test_interim_heads_are_skipped_and_connection_close_is_honoured() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (await read_request(reader))[0]
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: x\r\n\r\n"
                     b"HTTP/1.1 201 Created\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            for _ in range(2):
                resp = await http.post(url, content=b"{}")
                assert (resp.status_code, resp.content) == (201, b"ok")

    assert len(asyncio.run(with_server(handler, body))) == 2  # closed: a new one each time


def test_a_kept_connection_the_server_closed_is_not_reused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (await read_request(reader))[0]
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        # Keep-alive by the headers, then the server's idle timeout closes it.

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            assert (await http.get(url)).content == b"ok"
            await asyncio.sleep(0.05)  # the FIN arrives while the connection is idle
            assert (await http.get(url)).content == b"ok"

    assert len(asyncio.run(with_server(handler, body))) == 2


@pytest.mark.parametrize("wire,error,says", [
    (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", httpx.RemoteProtocolError,
     "without sending complete message body"),
    (CHUNKED_HEAD + b"5\r\nabc", httpx.RemoteProtocolError, "complete message body"),
    (CHUNKED_HEAD + b"zz\r\nabc\r\n", httpx.RemoteProtocolError, "chunk size"),
    (CHUNKED_HEAD + b"3\r\nabcXY0\r\n\r\n", httpx.RemoteProtocolError, "CRLF"),
    (b"", httpx.RemoteProtocolError, "without sending a response"),
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", httpx.RemoteProtocolError, "not an HTTP/1.x response"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: many\r\n\r\n", httpx.RemoteProtocolError,
     "Content-Length"),
])
def test_each_broken_response_is_the_httpx_error_the_engine_classifies(
        wire: bytes, error: type[Exception], says: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (await read_request(reader))[0]
        writer.write(wire)
        await writer.drain()

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            with pytest.raises(error, match=says):
                await (await http.get(url)).aread()

    asyncio.run(with_server(handler, body))


def test_a_read_timeout_is_httpx_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (await read_request(reader))[0]
        await asyncio.sleep(5)

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            with pytest.raises(httpx.ReadTimeout):
                await http.get(url, timeout=0.2)

    asyncio.run(with_server(handler, body))


def test_nothing_listening_is_a_connect_error_caused_by_the_refusal() -> None:
    async def body() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            with pytest.raises(httpx.ConnectError) as caught:
                await http.get(f"http://127.0.0.1:{port}")
        assert isinstance(caught.value.__cause__, ConnectionRefusedError)

    asyncio.run(body())


def test_no_more_connections_than_the_limit() -> None:
    open_now = peak = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_now, peak
        open_now += 1
        peak = max(peak, open_now)
        try:
            while True:
                (await read_request(reader))[0]
                await asyncio.sleep(0.01)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
        finally:
            open_now -= 1

    async def body(url: str) -> None:
        limits = httpx.Limits(max_connections=3)
        async with httpx.AsyncClient(transport=RawTransport(limits=limits)) as http:
            replies = await asyncio.gather(*(http.get(url) for _ in range(20)))
        assert [r.content for r in replies] == [b"ok"] * 20

    asyncio.run(with_server(handler, body))
    assert peak == 3


def test_chat_requests_go_as_bytes_and_keep_their_connection() -> None:
    """The engine's chat path (ChatClient on the raw transport, past httpx's objects):
    the head a server sees, the reply judged, one connection for every request."""
    import orjson

    from loadgen.engine.client import ChatClient, Timeouts
    from loadgen.engine.transport import make_http_client
    from loadgen.records import RequestRecord

    heads: list[bytes] = []
    events = [{"choices": [{"delta": {"content": "The plan is changed."}}]},
              {"choices": [{"delta": {}, "finish_reason": "stop"}]}]
    sse = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            heads.append((await read_request(reader))[0])
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n"
                         + _chunked([sse[i:i + 9] for i in range(0, len(sse), 9)]))
            await writer.drain()

    records: list[RequestRecord] = []

    async def body(url: str) -> None:
        timeouts = Timeouts(connect=2.0, first_token=5.0, idle=5.0, total=10.0)
        async with make_http_client("raw", 4, True, 2.0) as http:
            client = ChatClient(http, timeouts, api_key="sk-test")
            for seq in range(5):
                record = RequestRecord(run_id="r", scenario="s", phase="measurement",
                                       seq=seq, endpoint=url, item_id="i")
                await client.send(record, b'{"model": "m", "stream": true}', True)
                records.append(record)

    assert asyncio.run(with_server(handler, body)) == [0]
    assert [(r.status, r.content, r.finish_reason, r.error) for r in records] == \
        [(200, "The plan is changed.", "stop", None)] * 5
    first = heads[0].decode().lower().split("\r\n")
    assert first[0] == "post /v1/chat/completions http/1.1"
    for line in ("content-type: application/json", "accept: text/event-stream",
                 "authorization: bearer sk-test", "content-length: 30"):
        assert line in first, first
    assert any(x.startswith("host: 127.0.0.1:") for x in first)


def test_a_chunk_far_larger_than_a_read_arrives_whole() -> None:
    """One 3 MB chunk written in 4 KB pieces: handed on as it comes, byte for byte."""
    big = bytes(range(256)) * (3 * 4096)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (await read_request(reader))[0]
        wire = CHUNKED_HEAD + _chunked([b"head", big, b"tail"])
        for at in range(0, len(wire), 4096):
            writer.write(wire[at:at + 4096])
            await writer.drain()

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http, \
                http.stream("GET", url) as resp:
            pieces = [piece async for piece in resp.aiter_raw()]
        assert b"".join(pieces) == b"head" + big + b"tail"
        assert max(map(len, pieces)) < len(big)  # handed on as it came, not held whole

    asyncio.run(with_server(handler, body))


def _trailered(pieces: list[bytes], rng: random.Random) -> bytes:
    """Chunked with extensions on some size lines, zero-padded or upper-case sizes, and
    a trailer section after the last chunk (RFC 9112 7.1)."""
    out = []
    for p in [*pieces, b""]:
        size = rng.choice((b"%x", b"%X", b"00%x")) % len(p)
        ext = rng.choice((b"", b";a=b", b';q="x;y"', b";flag"))
        out.append(size + ext + b"\r\n" + (p + b"\r\n" if p else b""))
    trailers = rng.choice((b"", b"x-trace: 1\r\n", b"x-a: 1\r\nserver-timing: d;dur=2\r\n"))
    return b"".join(out) + trailers + b"\r\n"


def test_extensions_and_trailers_cut_anywhere_keep_the_connection_in_step() -> None:
    """Generated bodies with extensions and trailers, in random cuts, on one kept
    connection: each body whole, and the trailers never read as the next head."""
    rng = random.Random(11)
    cases = [[bytes(rng.randrange(256) for _ in range(rng.choice((1, 9, 300)))) for _ in
              range(rng.randrange(1, 12))] for _ in range(30)]
    wires = [CHUNKED_HEAD + _trailered(pieces, rng) for pieces in cases]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for wire in wires:
            (await read_request(reader))[0]
            await _write_in_cuts(writer, wire, rng, 40)

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            for pieces in cases:
                assert (await http.get(url)).content == b"".join(pieces)

    assert asyncio.run(with_server(handler, body)) == [0]


@pytest.mark.parametrize("wire,says", [
    # chunk sizes Python's int() would read and HTTP does not
    *[(CHUNKED_HEAD + size + b"\r\nabc\r\n0\r\n\r\n", "chunk size")
      for size in (b"0x3", b"+3", b" 3", b"0_3", b"3\n", b"", b"-0", b"3 ;x" + b"\n")],
    (CHUNKED_HEAD + b"3;x\nabc\r\n0\r\n\r\n", "chunk size"),  # a bare LF after an extension
    (CHUNKED_HEAD + b"3\r\nabc\r\n0\r\nno colon\r\n\r\n", "trailer line"),
    (CHUNKED_HEAD + b"3\r\nabc\r\n0\r\nbad name: 1\r\n\r\n", "trailer line"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd",
     "conflicting Content-Length"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 3, 4\r\n\r\nabcd", "Content-Length"),
    *[(b"HTTP/1.1 200 OK\r\ncontent-length: %s\r\n\r\nabc" % value, "Content-Length")
      for value in (b"+3", b"3_0", b"0x3", b"-3", b"")],
])
def test_framing_the_reference_stacks_refuse_is_refused(wire: bytes, says: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (await read_request(reader))[0]
        writer.write(wire)
        await writer.drain()

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            with pytest.raises(httpx.RemoteProtocolError, match=says):
                await (await http.get(url)).aread()

    asyncio.run(with_server(handler, body))


def test_a_repeated_content_length_of_one_value_is_that_value() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (await read_request(reader))[0]
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 3, 3\r\ncontent-length: 3\r\n\r\nabc")
        await writer.drain()

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            assert (await http.get(url)).content == b"abc"

    asyncio.run(with_server(handler, body))


@pytest.mark.parametrize("transport", ["raw", "httpx"])
def test_a_server_that_stops_reading_is_a_write_timeout(transport: str) -> None:
    """Writing a request is bounded as httpx bounds it: a server that takes the head and
    reads no more leaves the write waiting, which ends in httpx.WriteTimeout on the raw
    transport as on httpx's own, never in a wait without end."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)  # reads nothing

    async def body(url: str) -> None:
        stack = RawTransport() if transport == "raw" else httpx.AsyncHTTPTransport()
        async with httpx.AsyncClient(transport=stack) as http:
            started = asyncio.get_running_loop().time()
            with pytest.raises(httpx.WriteTimeout):
                await http.post(url, content=b"x" * (64 << 20),
                                timeout=httpx.Timeout(5.0, write=0.3))
            assert asyncio.get_running_loop().time() - started < 4.0

    asyncio.run(with_server(handler, body))


def test_waiting_for_a_busy_pool_is_bounded_by_the_pool_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (await read_request(reader))[0]
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")  # the body never ends
        await writer.drain()
        await asyncio.sleep(10)

    async def body(url: str) -> None:
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(transport=RawTransport(limits=limits)) as http, \
                http.stream("GET", url):  # holds the only connection
            with pytest.raises(httpx.PoolTimeout):
                await http.get(url, timeout=httpx.Timeout(5.0, pool=0.2))

    asyncio.run(with_server(handler, body))


def test_a_repaired_head_keeps_its_connection_in_step() -> None:
    """A head llhttp refuses and h11 repairs (a folded field, one Content-Length twice,
    bare-LF line ends) is read as h11 reads it, and the connection stays usable: the
    next reply on it, plain, is read by llhttp again."""
    repaired = (b"HTTP/1.1 200 OK\nx-note: kept\n  transfer-encoding: chunked\n"
                b"content-length: 3, 3\ncontent-length: 3\n\nabc")
    plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for wire in (repaired, plain, repaired):
            (await read_request(reader))[0]
            writer.write(wire)
            await writer.drain()

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            first = await http.get(url)
            assert first.content == b"abc"
            assert first.headers["x-note"] == "kept transfer-encoding: chunked"
            assert (await http.get(url)).content == b"ok"
            assert (await http.get(url)).content == b"abc"

    assert asyncio.run(with_server(handler, body)) == [0]


def test_bytes_after_a_reply_and_a_reply_to_head_are_not_kept() -> None:
    """Bytes after a complete reply answer nothing (a server out of step); a reply to
    HEAD names a body that never comes. Neither connection is asked again."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await read_request(reader))[0]
        if head.startswith(b"HEAD"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 2")
        await writer.drain()
        await asyncio.sleep(1)

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            assert (await http.get(url)).content == b"ok"
            resp = await http.head(url)
            assert (resp.status_code, resp.content) == (200, b"")
            assert (await http.get(url)).content == b"ok"

    assert len(asyncio.run(with_server(handler, body))) == 3


def test_a_write_with_no_timeout_given_is_still_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No write timeout (None) is MAX_WRITE_S, never a wait without end."""
    from loadgen.engine import raw_http

    monkeypatch.setattr(raw_http, "MAX_WRITE_S", 0.3)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)  # reads nothing

    async def body(url: str) -> None:
        async with httpx.AsyncClient(transport=RawTransport()) as http:
            with pytest.raises(httpx.WriteTimeout, match=r"0\.3 s"):
                await http.post(url, content=b"x" * (64 << 20),
                                timeout=httpx.Timeout(5.0, write=None))

    asyncio.run(with_server(handler, body))
