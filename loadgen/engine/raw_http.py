"""HTTP/1.1 over asyncio streams, under httpx: the cheapest bytes a streamed reply can cost.

A vLLM stream is one HTTP chunk per SSE event: a 64-token reply is about 70 chunks.
httpx's own stack (httpcore, h11, anyio) walks each chunk through several layers of
Python, aiohttp's stream reader through several calls; here a socket read of up to 64 KB
goes to llhttp (the C parser Node.js maintains, through httptools) in one call, and
its body spans are gathered in a list, so a short reply costs a few reads, not a few
hundred calls. httpx stays the API the engine speaks: this is an
`httpx.AsyncBaseTransport`, and every failure is raised as the httpx exception the
engine already classifies (with the socket's own error as its cause, so "nothing
listening", "no such host" and TLS problems are still told apart).

What it speaks: HTTP/1.1 keep-alive to the servers a qualification talks to (vLLM,
gateways in front of it, the embedded sim): Content-Length, chunked (extensions and
trailers read past) and read-to-close bodies, 1xx interim heads skipped (a 101 no
request asked for refused), TLS with the system's trust store (as aiohttp's default).
No byte of framing is parsed here: llhttp reads it, strictly but for a head's bare-LF
line ends (RFC 9112 2.2 lets a recipient take them, as h11 does; the leniency is off
again for the body, where a chunk line ended by a bare LF is refused as h11 refuses
it). A head llhttp refuses only for what RFC 9112 lets a recipient repair (a folded
field, a Content-Length repeated with one value) is read again by h11, the parser
httpx itself uses, and handed on as h11 reads it. No proxies and no .netrc, as for
every transport here (trust_env off). A kept connection the server has closed meanwhile
is never reused (the check httpcore makes), nor one idle longer than the pool's
keep-alive expiry (`httpx.Limits.keepalive_expiry`): a server that closes idle
connections after 5 s (vLLM, uvicorn) may be closing it at the very moment it is
written to, and says nothing in its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator

import h11
import httptools
import httpx

from loadgen.engine.content_coding import decoded

#: One socket read: a whole burst of short replies, or a good part of a long one.
READ_SIZE = 64 * 1024
#: A response head larger than this is a broken server (llhttp sets no bound of its own).
MAX_HEAD_BYTES = 64 * 1024
#: How long writing a request may take when no write timeout is given: a server that
#: stops reading must end in httpx.WriteTimeout, never in a wait without end.
MAX_WRITE_S = 60.0
#: llhttp's refusals of a head that RFC 9112 lets a recipient repair (5.2: a folded field
#: line is read with its fold as a space; RFC 9110 8.6: a Content-Length repeated, in a
#: list or in fields, with one value is that value). h11 repairs them; llhttp has no
#: leniency for them short of `lenient_headers`, which also lets by a NUL in a value and
#: a continuation line before any field.
REPAIRABLE = frozenset({"Unexpected whitespace after header value",
                        "Duplicate Content-Length", "Invalid character in Content-Length"})
_HEAD_LENIENT = {"lenient_optional_cr_before_lf": True}
_BODY_STRICT = {"lenient_optional_cr_before_lf": False}


class StaleConnection(httpx.RemoteProtocolError):
    """A kept connection failed before any byte of the reply came back: the server had
    closed it (its keep-alive ran out) as the request went out. The request never reached
    it, so it is safe to send again on a new connection."""


class _Repairable(Exception):
    """llhttp refused a head for a reason h11 may repair (`REPAIRABLE`)."""

    def __init__(self, refusal: httpx.RemoteProtocolError) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


@contextlib.asynccontextmanager
async def _bounded(seconds: float | None, late: type[httpx.TimeoutException], what: str,
                   failed: type[httpx.TransportError] | None = None
                   ) -> AsyncIterator[None]:
    """A step of a request (connect, write, wait for the pool) bounded in time, its
    failures as the httpx errors the engine classifies: `late` after `seconds`, and
    `failed` for the socket's own errors where the step has one."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as exc:
        raise late(f"{what} within {seconds:g} s") from exc
    except (OSError, ssl.SSLError) as exc:
        if failed is None:
            raise
        raise failed(f"{type(exc).__name__}: {exc}") from exc


class _Connection:
    """One socket and the llhttp parser reading it; the parser's callbacks (`on_*`) keep
    what the reply in progress has shown so far."""

    __slots__ = ("done", "eof_ends", "head", "head_done", "headers", "idle_since",
                 "interim", "keep", "on_body", "parser", "pieces", "reader", "reason",
                 "reused", "status", "stray", "version", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0  # when it went back to the pool (loop time)
        self.reused = False  # it served a request before this one
        self.pieces: list[bytes] = []  # body bytes parsed, not yet handed on
        # llhttp's body spans go straight into the list: no call of ours per chunk.
        self.on_body = self.pieces.append
        self.parser = httptools.HttpResponseParser(self)
        self.expect_reply()

    def expect_reply(self) -> None:
        """Ready for the reply to a request about to be written."""
        self.head = b""  # bytes read before the final head was complete
        self.head_done = self.done = self.interim = self.keep = self.stray = False
        self.eof_ends = False
        self.status = 0
        self.reason = b""
        self.version = b""
        self.headers: list[tuple[bytes, bytes]] = []

    def usable(self) -> bool:
        """Idle and still open: a server that closed a kept connection is not asked
        again."""
        return not (self.writer.is_closing() or self.reader.at_eof())

    def close(self) -> None:
        self.writer.close()

    async def read(self, timeout: float | None) -> bytes:
        """The next bytes from the socket ('' at EOF), as httpx's errors."""
        try:
            if timeout is None:
                return await self.reader.read(READ_SIZE)
            async with asyncio.timeout(timeout):
                return await self.reader.read(READ_SIZE)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no bytes within {timeout:g} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from exc

    def feed(self, data: bytes) -> None:
        """Hand bytes read to llhttp; its refusal as httpx.RemoteProtocolError. Bytes
        after a complete reply are no reply to anything: the connection is not kept."""
        if not self.head_done:
            self.head += data
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            if self.done:
                self.stray = True
                return
            refusal = _refusal(exc, self.head_done)
            if not self.head_done and str(exc) in REPAIRABLE:
                raise _Repairable(refusal) from exc
            raise refusal from exc

    # -- llhttp's callbacks -----------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.done:
            self.stray = True
            return
        self.headers = []
        self.reason = b""
        self.parser.set_dangerous_leniencies(**_HEAD_LENIENT)

    def on_status(self, reason: bytes) -> None:
        self.reason = reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head_done:  # trailer fields are read past
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status == 101:
            # A switch of protocols no request here asked for (none sends Upgrade): the
            # bytes that follow are not HTTP/1.1, and no reply is read from them.
            raise httpx.RemoteProtocolError("101 Switching Protocols without an Upgrade "
                                            "request")
        if 100 <= status < 200:  # an interim head (llhttp ends it as a message): skipped
            self.interim = True
            return
        version = self.parser.get_http_version()
        if not version.startswith("1."):
            raise httpx.RemoteProtocolError(f"not an HTTP/1.x response: HTTP/{version}")
        self.parser.set_dangerous_leniencies(**_BODY_STRICT)
        self.status, self.version, self.head_done = status, b"HTTP/" + version.encode(), True
        # No Content-Length and not chunked: the body ends when the server closes
        # (llhttp waits for an end of input that httptools cannot tell it).
        self.eof_ends = not any(
            (lower := name.lower()) == b"content-length"
            or (lower == b"transfer-encoding" and b"chunked" in value.lower())
            for name, value in self.headers)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            return
        self.done = True
        self.keep = self.parser.should_keep_alive()


def _refusal(exc: Exception, head_done: bool) -> httpx.RemoteProtocolError:
    """llhttp's refusal as the protocol error the engine classifies, named for where it
    came (the head, a chunk line, a chunk's end, a trailer)."""
    if isinstance(exc.__context__, httpx.RemoteProtocolError):  # raised by a callback
        return exc.__context__
    reason = str(exc)
    if not head_done:
        if "Content-Length" in reason:
            what = ("conflicting Content-Length" if reason.startswith("Duplicate")
                    else "malformed Content-Length")
        elif "HTTP/" in reason:
            what = "not an HTTP/1.x response"
        elif isinstance(exc, httptools.HttpParserInvalidStatusError):
            what = "malformed status line"
        else:
            what = "malformed response head"
    elif "chunk size" in reason or "chunk ext" in reason:
        what = "malformed chunked body: chunk size line"
    elif "chunk data" in reason:
        what = "malformed chunked body: a chunk does not end with CRLF"
    else:
        what = "malformed chunked body: trailer line"
    return httpx.RemoteProtocolError(f"{what} (llhttp: {reason})")


async def _read_head(conn: _Connection, timeout: float | None) -> None:
    """Read until the final head is parsed (1xx interim heads skipped); the body bytes
    that came with it wait in `conn.pieces`."""
    while not conn.head_done:
        data = await conn.read(timeout)
        if not data:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.")
        try:
            conn.feed(data)
        except _Repairable as exc:
            await _reread_head(conn, exc.refusal, timeout)
        if not conn.head_done and len(conn.head) > MAX_HEAD_BYTES:
            raise httpx.RemoteProtocolError("response head over 64 KB")


async def _reread_head(conn: _Connection, refusal: httpx.RemoteProtocolError,
                       timeout: float | None) -> None:
    """The heads read so far, read again by h11 (`REPAIRABLE`): its final head goes to a
    new llhttp parser as h11 read it (a fold a space, one Content-Length), followed by
    the bytes after it. A head h11 refuses too is llhttp's refusal."""
    reader = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
    reader.send(h11.Request(method="GET", target="/", headers=[("host", "-")]))
    reader.send(h11.EndOfMessage())
    reader.receive_data(conn.head)
    while True:
        try:
            event = reader.next_event()
        except h11.RemoteProtocolError as exc:
            raise refusal from exc
        if isinstance(event, h11.Response):
            break
        if event is h11.NEED_DATA:
            data = await conn.read(timeout)
            if not data:
                raise refusal
            reader.receive_data(data)
    head = b"HTTP/%s %d %s\r\n" % (event.http_version, event.status_code, event.reason)
    head += b"".join(name + b": " + value + b"\r\n" for name, value in event.headers.raw_items())
    conn.parser = httptools.HttpResponseParser(conn)  # the first one stopped at its refusal
    conn.head = b""
    try:
        conn.feed(head + b"\r\n" + reader.trailing_data[0])
    except _Repairable as exc:
        raise exc.refusal from None
    if not conn.head_done:
        raise refusal


class _Body(httpx.AsyncByteStream):
    """A response body as it arrives; the connection goes back to the pool only when the
    body was read to its end and the server keeps it open."""

    def __init__(self, pool: RawTransport, key: tuple[str, str, int], conn: _Connection,
                 read_timeout: float | None, empty: bool = False) -> None:
        self._pool = pool
        self._key = key
        self._conn: _Connection | None = conn
        self._timeout = read_timeout
        self._empty = empty  # a reply to HEAD: llhttp would wait for the body it names
        self._complete = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        assert conn is not None
        pieces = conn.pieces
        while not self._empty:
            if pieces:
                piece = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                pieces.clear()
                yield piece
            if conn.done:
                break
            data = await conn.read(self._timeout)
            if not data:
                if conn.eof_ends:
                    break
                raise httpx.RemoteProtocolError("peer closed connection without sending "
                                                "complete message body")
            conn.feed(data)
        self._complete = True

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._complete and conn.done and conn.keep and not conn.stray:
            self._pool.release(self._key, conn)
        else:
            conn.close()
            self._pool.forget()


def origin(url: httpx.URL) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL: the pool's key."""
    return url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80)


class RawReply:
    """A response's head and its body as it arrives (`aiter_bytes`); `aclose` hands the
    connection back (or closes it when the body was not read to its end)."""

    __slots__ = ("body", "headers", "http_version", "reason", "status_code")

    def __init__(self, status: int, reason: bytes, headers: list[tuple[bytes, bytes]],
                 version: bytes, body: _Body) -> None:
        self.status_code = status
        self.reason = reason
        self.headers = headers
        self.http_version = version
        self.body = body

    def header(self, name: bytes) -> str | None:
        """The first value of a header (`name` lower-case), as text."""
        for key, value in self.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as sent, decoded when the server compressed it anyway (no
        Accept-Encoding is sent, but a gateway may compress regardless), by the decoder
        every transport's replies go through (engine/content_coding)."""
        coding = self.header(b"content-encoding")
        if coding is None:
            return self.body.__aiter__()
        return decoded(self.body.__aiter__(), coding)

    async def aread(self) -> bytes:
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def aclose(self) -> None:
        await self.body.aclose()


class RawTransport(httpx.AsyncBaseTransport):
    """Keep-alive connections per origin, at most `limits.max_connections` open."""

    def __init__(self, verify: bool = True, limits: httpx.Limits | None = None) -> None:
        self._verify = verify
        self._ssl_context: ssl.SSLContext | None = None
        limits = limits or httpx.Limits()
        self._max = limits.max_connections
        self._expiry = limits.keepalive_expiry
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._open = 0
        self._freed: asyncio.Event | None = None

    @property
    def _ssl(self) -> ssl.SSLContext:
        """Made on the first https:// connection (loading the trust store takes time)."""
        if self._ssl_context is None:
            context = ssl.create_default_context()
            if not self._verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            self._ssl_context = context
        return self._ssl_context

    def release(self, key: tuple[str, str, int], conn: _Connection) -> None:
        conn.idle_since = asyncio.get_running_loop().time()
        conn.reused = True
        self._idle.setdefault(key, []).append(conn)
        self._wake()

    def forget(self) -> None:
        """A connection was closed: room for another."""
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        if self._freed is not None:
            self._freed.set()

    async def _connection(self, key: tuple[str, str, int], connect_timeout: float | None,
                          fresh: bool = False, pool_timeout: float | None = None
                          ) -> _Connection:
        """A kept connection to `key` (unless `fresh`), or a new one; waiting for one to
        come back at most `pool_timeout` seconds when all are busy (httpx.PoolTimeout)."""
        now = asyncio.get_running_loop().time()
        while True:
            idle = self._idle.get(key)
            while idle and not fresh:
                conn = idle.pop()
                expired = self._expiry is not None and now - conn.idle_since >= self._expiry
                if conn.usable() and not expired:
                    return conn
                conn.close()
                self._open -= 1
            if self._max is None or self._open < self._max:
                break
            if not self._close_one_idle():  # all busy: wait for one to come back
                self._freed = self._freed or asyncio.Event()
                self._freed.clear()
                async with _bounded(pool_timeout, httpx.PoolTimeout,
                                    "no connection came back"):
                    await self._freed.wait()
        self._open += 1
        try:
            return await self._connect(key, connect_timeout)
        except BaseException:
            self._open -= 1
            raise

    def _close_one_idle(self) -> bool:
        for conns in self._idle.values():
            if conns:
                conns.pop().close()
                self._open -= 1
                return True
        return False

    async def _connect(self, key: tuple[str, str, int], timeout: float | None) -> _Connection:
        scheme, host, port = key
        async with _bounded(timeout, httpx.ConnectTimeout, f"no connection to {host}:{port}",
                            httpx.ConnectError):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=self._ssl if scheme == "https" else None,
                limit=READ_SIZE * 4)
        return _Connection(reader, writer)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"{url.scheme!r} is not http or https")
        timeouts = request.extensions.get("timeout") or {}
        body = await request.aread()
        head = [b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), url.raw_path)]
        head += [name + b": " + value + b"\r\n" for name, value in request.headers.raw]
        reply = await self.send_bytes(origin(url), b"".join(head) + b"\r\n" + body,
                                      connect_timeout=timeouts.get("connect"),
                                      read_timeout=timeouts.get("read"),
                                      write_timeout=timeouts.get("write"),
                                      pool_timeout=timeouts.get("pool"),
                                      head_only=request.method == "HEAD")
        return httpx.Response(reply.status_code, headers=reply.headers, stream=reply.body,
                              extensions={"http_version": reply.http_version,
                                          "reason_phrase": reply.reason})

    async def send_bytes(self, key: tuple[str, str, int], wire: bytes, *,
                         connect_timeout: float | None, read_timeout: float | None,
                         write_timeout: float | None = None,
                         pool_timeout: float | None = None,
                         head_only: bool = False, fresh: bool = False) -> RawReply:
        """Send one request already on the wire's terms (head and body); its reply as it
        arrives. The engine's chat requests come this way, past httpx's request and
        response objects: a request's head is the same bytes every time but the
        length. `fresh`: on a new connection, never a kept one. The request is written
        within `write_timeout` (`MAX_WRITE_S` when none is given: a server that stops
        reading is httpx.WriteTimeout, never a wait without end), as httpx bounds its
        writes."""
        conn = await self._connection(key, connect_timeout, fresh, pool_timeout)
        conn.expect_reply()
        try:
            conn.writer.write(wire)
            bound = MAX_WRITE_S if write_timeout is None else write_timeout
            async with _bounded(bound, httpx.WriteTimeout, "the request was not written",
                                httpx.WriteError):
                await conn.writer.drain()
            await _read_head(conn, read_timeout)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            conn.close()
            self.forget()
            if conn.reused and not conn.head:  # a kept connection closed under us
                raise StaleConnection(str(exc)) from exc
            raise
        except BaseException:
            conn.close()
            self.forget()
            raise
        body = _Body(self, key, conn, read_timeout, empty=head_only)
        return RawReply(conn.status, conn.reason, conn.headers, conn.version, body)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


