"""HTTP/1.1 over asyncio streams, under httpx: the cheapest bytes a streamed reply can cost.

A vLLM stream is one HTTP chunk per SSE event: a 64-token reply is about 70 chunks.
aiohttp's stream reader walks each chunk through several Python calls; here a socket
read of up to 64 KB is de-chunked in one pass (`bytes.find` and slicing), so a short
reply costs a few reads, not a few hundred calls. httpx stays the API the engine
speaks: this is an `httpx.AsyncBaseTransport`, and every failure is raised as the httpx
exception the engine already classifies (with the socket's own error as its cause, so
"nothing listening", "no such host" and TLS problems are still told apart).

What it speaks: HTTP/1.1 keep-alive to the servers a qualification talks to (vLLM,
gateways in front of it, the embedded sim): Content-Length, chunked (extensions and
trailers read past) and read-to-close bodies, 1xx interim heads skipped (a 101 no
request asked for refused), heads with bare LF line ends or folded fields read as RFC
9112 says, TLS with the system's trust store (as aiohttp's default). Framing is read
as strictly as h11 reads it: a chunk size, a Content-Length, a field line or a trailer
that the reference stacks refuse is a protocol error here too, never a guess. No
proxies and no .netrc, as for every transport here (trust_env off). A kept connection
the server has closed meanwhile is never reused (the check httpcore makes), nor one idle
longer than the pool's keep-alive expiry (`httpx.Limits.keepalive_expiry`): a server
that closes idle connections after 5 s (vLLM, uvicorn) may be closing it at the very
moment it is written to, and says nothing in its log.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator

import httpx

from loadgen.engine.content_coding import decoded

#: One socket read: a whole burst of short replies, or a good part of a long one.
READ_SIZE = 64 * 1024
#: A response head larger than this is a broken server.
MAX_HEAD_BYTES = 64 * 1024
NO_BODY_STATUS = frozenset({204, 304})


class StaleConnection(httpx.RemoteProtocolError):
    """A kept connection failed before any byte of the reply came back: the server had
    closed it (its keep-alive ran out) as the request went out. The request never reached
    it, so it is safe to send again on a new connection."""


class _Connection:
    __slots__ = ("buf", "idle_since", "reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buf = b""  # read from the socket, not yet handed on
        self.idle_since = 0.0  # when it went back to the pool (loop time)
        self.reused = False  # it served a request before this one

    def usable(self) -> bool:
        """Idle and still open: no EOF and no stray bytes (a server that closed a kept
        connection, or wrote after its response, is not asked again)."""
        return not (self.writer.is_closing() or self.reader.at_eof() or self.buf)

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


class _Body(httpx.AsyncByteStream):
    """A response body as it arrives; the connection goes back to the pool only when the
    body was read to its end and the server keeps it open."""

    def __init__(self, pool: RawTransport, key: tuple[str, str, int], conn: _Connection,
                 length: int | None, chunked: bool, keep: bool,
                 read_timeout: float | None) -> None:
        self._pool = pool
        self._key = key
        self._conn: _Connection | None = conn
        self._length = length
        self._chunked = chunked
        self._keep = keep
        self._timeout = read_timeout
        self._complete = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        assert conn is not None
        if self._chunked:
            async for piece in self._chunks(conn):
                yield piece
        elif self._length is not None:
            async for piece in self._counted(conn, self._length):
                yield piece
        else:  # no length: the body ends when the server closes
            self._keep = False
            if conn.buf:
                piece, conn.buf = conn.buf, b""
                yield piece
            while data := await conn.read(self._timeout):
                yield data
        self._complete = True

    async def _counted(self, conn: _Connection, left: int) -> AsyncIterator[bytes]:
        while left > 0:
            if not conn.buf:
                conn.buf = await conn.read(self._timeout)
                if not conn.buf:
                    raise httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body "
                        f"({left} of its bytes missing)")
            piece = conn.buf[:left]
            conn.buf = conn.buf[left:]
            left -= len(piece)
            yield piece

    async def _chunks(self, conn: _Connection) -> AsyncIterator[bytes]:
        buf, conn.buf = conn.buf, b""
        while True:
            pieces: list[bytes] = []
            pos, size_of = 0, len(buf)
            while (eol := buf.find(b"\r\n", pos)) >= 0:
                size = _chunk_size(buf[pos:eol])
                start = eol + 2
                if size == 0:  # the last chunk, then trailer lines (if any) to a blank one
                    rest = _after_trailers(buf, start)
                    if rest < 0:
                        break  # read on: the trailer section is not all here yet
                    conn.buf = buf[rest:]
                    if pieces:
                        yield b"".join(pieces)
                    return
                end = start + size
                if end + 2 > size_of:
                    have = size_of - start
                    if READ_SIZE <= have < size:
                        # A chunk larger than a read: hand on what came and keep what is
                        # left of it as a chunk of its own, so a long chunk is copied once,
                        # not once a read.
                        pieces.append(buf[start:])
                        buf, pos = b"%x\r\n" % (size - have), 0
                    break
                if buf[end:end + 2] != b"\r\n":
                    raise httpx.RemoteProtocolError("malformed chunked body: a chunk does "
                                                    "not end with CRLF")
                pieces.append(buf[start:end])
                pos = end + 2
            if pieces:
                yield pieces[0] if len(pieces) == 1 else b"".join(pieces)
            buf = buf[pos:]
            if len(buf) > MAX_HEAD_BYTES and buf.find(b"\r\n") < 0:
                raise httpx.RemoteProtocolError("malformed chunked body: no chunk size line")
            data = await conn.read(self._timeout)
            if not data:
                raise httpx.RemoteProtocolError("peer closed connection without sending "
                                                "complete message body (chunked)")
            buf += data

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._complete and self._keep and not conn.buf:
            self._pool.release(self._key, conn)
        else:
            conn.close()
            self._pool.forget()


#: A chunk-size line (RFC 9112 7.1): hex digits, extensions (ignored) after `;`, and the
#: trailing blanks h11 also lets by. Python's int() would take more ("0x1f", "+1f",
#: "1_f", " 1f"): a server the reference stacks (h11, llhttp) refuse must not pass here.
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:;[^\r\n]*)?[ \t]*")


_HEX = b"0123456789abcdefABCDEF"


def _chunk_size(line: bytes) -> int:
    if 0 < len(line) <= 16 and not line.strip(_HEX):  # what servers send: digits alone
        return int(line, 16)
    match = _CHUNK_LINE.fullmatch(line)
    if match is None:
        raise httpx.RemoteProtocolError(
            f"malformed chunked body: chunk size {line[:40]!r}")
    return int(match[1], 16)


def _after_trailers(buf: bytes, start: int) -> int:
    """Where the message after a chunked body begins: past the trailer section at `start`
    (header lines, then a blank line; RFC 9112 7.1.2), or -1 when it is not all read yet.
    A client that stops at `0\r\n\r\n` would take a trailer for the next response's
    head; the fields themselves are dropped (none of them is needed here)."""
    if buf.startswith(b"\r\n", start):
        return start + 2
    end = buf.find(b"\r\n\r\n", start)
    if end < 0:
        if len(buf) - start > MAX_HEAD_BYTES:
            raise httpx.RemoteProtocolError("malformed chunked body: trailers over 64 KB")
        return -1
    for line in buf[start:end].split(b"\r\n"):
        name, sep, _ = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name) or b"\n" in line or b"\r" in line:
            raise httpx.RemoteProtocolError(
                f"malformed chunked body: trailer line {line[:80]!r}")
    return end + 4


#: A field name (RFC 9110 5.6.2 token).
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _content_length(value: bytes, seen: int | None) -> int:
    """A Content-Length value (RFC 9110 8.6): digits only; a list of one value repeated
    stands for that value; two different values, in one field or in two, frame the body
    two ways, and neither is trusted (h11 and llhttp refuse them as well)."""
    values = {v.strip() for v in value.split(b",")}
    digits = values.pop() if len(values) == 1 else b""
    if not digits.isdigit() or len(digits) > 19:
        raise httpx.RemoteProtocolError(f"malformed Content-Length {value[:40]!r}")
    length = int(digits)
    if seen is not None and seen != length:
        raise httpx.RemoteProtocolError(f"conflicting Content-Length: {seen} and {length}")
    return length


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
                try:
                    async with asyncio.timeout(pool_timeout):
                        await self._freed.wait()
                except TimeoutError as exc:
                    raise httpx.PoolTimeout(f"no connection came back within "
                                            f"{pool_timeout:g} s") from exc
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
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self._ssl if scheme == "https" else None,
                    limit=READ_SIZE * 4)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {host}:{port} within "
                                       f"{timeout:g} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from exc
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
        within `write_timeout` (a server that stops reading is httpx.WriteTimeout, never
        a wait without end), as httpx bounds its writes."""
        conn = await self._connection(key, connect_timeout, fresh, pool_timeout)
        try:
            conn.writer.write(wire)
            try:
                async with asyncio.timeout(write_timeout):
                    await conn.writer.drain()
            except TimeoutError as exc:
                raise httpx.WriteTimeout(f"the request was not written within "
                                         f"{write_timeout:g} s") from exc
            except (OSError, ssl.SSLError) as exc:
                raise httpx.WriteError(f"{type(exc).__name__}: {exc}") from exc
            status, reason, headers, version = await _read_head(conn, read_timeout)
            length: int | None = None
            chunked = False
            keep = version == b"HTTP/1.1"
            for name, value in headers:
                lower = name.lower()
                if lower == b"content-length":
                    length = _content_length(value, length)
                elif lower == b"transfer-encoding":
                    chunked = b"chunked" in value.lower()
                elif lower == b"connection":
                    keep = (keep and b"close" not in value.lower()) or \
                        b"keep-alive" in value.lower()
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            conn.close()
            self.forget()
            if conn.reused and not conn.buf:  # a kept connection closed under us
                raise StaleConnection(str(exc)) from exc
            raise
        except BaseException:
            conn.close()
            self.forget()
            raise
        if head_only or status in NO_BODY_STATUS:
            chunked, length = False, 0
        body = _Body(self, key, conn, length, chunked, keep, read_timeout)
        return RawReply(status, reason, headers, version, body)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


#: The end of a response head: a blank line, its line ends CRLF or a bare LF (RFC 9112
#: 2.2 lets a recipient take LF alone for a line end, as h11 and llhttp do).
_HEAD_END = re.compile(rb"\n\r?\n")
_LINE_END = re.compile(rb"\r?\n")
#: A status line (RFC 9112 4): the version, three digits, the reason (maybe empty).
_STATUS_LINE = re.compile(rb"(HTTP/1\.[0-9]) ([0-9]{3})(?: ([^\r\n]*))?")


async def _read_head(conn: _Connection, timeout: float | None
                     ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
    """(status, reason, headers, HTTP version) of the next final response (1xx interim
    heads, 100 Continue or 103 Early Hints, skipped)."""
    buf = conn.buf
    while True:
        end = _HEAD_END.search(buf)
        if end is None:
            if len(buf) > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("response head over 64 KB")
            data = await conn.read(timeout)
            if not data:
                raise httpx.RemoteProtocolError(
                    "Server disconnected without sending a response.")
            buf += data
            continue
        head = buf[:end.start()]  # up to the LF that ends its last line
        lines = _LINE_END.split(head[:-1] if head.endswith(b"\r") else head)
        buf = buf[end.end():]
        status_line = _STATUS_LINE.fullmatch(lines[0])
        if status_line is None:
            raise httpx.RemoteProtocolError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
        version, status = status_line[1], int(status_line[2])
        if status == 101:
            # A switch of protocols no request here asked for (none sends Upgrade): the
            # bytes that follow are not HTTP/1.1, and no reply is read from them.
            raise httpx.RemoteProtocolError("101 Switching Protocols without an Upgrade "
                                            "request")
        if 100 <= status < 200:
            continue  # an interim head: the final one follows
        conn.buf = buf
        return status, status_line[3] or b"", _fields(lines[1:]), version


def _fields(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    """A head's field lines as (name, value). A line that opens with a space or a tab
    continues the field before it (obs-fold, RFC 9112 5.2: a recipient replaces it with
    a space, as h11 and llhttp do): never a field of its own, whatever it looks like. A
    line of no field (no colon, a name that is no token, a space before the colon) is a
    protocol error, as in h11."""
    headers: list[tuple[bytes, bytes]] = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if not headers:
                raise httpx.RemoteProtocolError(
                    f"a continuation line opens the head: {line[:80]!r}")
            name, value = headers[-1]
            headers[-1] = (name, (value + b" " + line.strip(b" \t")).strip(b" \t"))
            continue
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name) or b"\r" in value or b"\0" in value:
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip(b" \t")))
    return headers
