"""The HTTP stack under httpx: the plug point for a faster transport.

The code talks to httpx.AsyncClient only; what moves the bytes is chosen here, or given:
an `httpx.AsyncBaseTransport` passed in its place (an `httpx.MockTransport`, an ASGI app's
transport) answers every request the engine sends, so an engine test that needs only
replies starts no server.
`raw` (engine/raw_http: HTTP/1.1 on asyncio streams, a socket read handed to llhttp in
one call) is the default: a streamed reply is one HTTP chunk per token, and it costs
the least per chunk. `aiohttp` (from httpx-aiohttp) and `httpx` (httpcore + h11 + anyio,
the reference stack) stay selectable. None reads proxy settings or .netrc from the
environment (trust_env off): a benchmark client must not pay a file lookup per request,
and a qualification run must go where the scenario says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from loadgen.engine.raw_http import RawTransport

TRANSPORTS = ("auto", "raw", "aiohttp", "httpx")
#: How long a kept connection may sit idle before it is closed rather than reused: below
#: vLLM's (and uvicorn's) 5 s keep-alive, so the client retires it before the server does.
IDLE_CONNECTION_S = 3.0


def resolve_transport(kind: str) -> str:
    return "raw" if kind == "auto" else kind


#: A transport by name (TRANSPORTS), or one given whole.
Transport = str | httpx.AsyncBaseTransport


def make_http_client(kind: Transport, concurrency: int, verify_tls: bool,
                     connect_timeout_s: float,
                     idle_connection_s: float = IDLE_CONNECTION_S) -> httpx.AsyncClient:
    """One client per run; its connection pool is sized to the concurrency, and a kept
    connection idle for `idle_connection_s` is retired, never reused (every transport
    honours it: httpcore's and aiohttp's keep-alive expiry, the raw pool's own)."""
    limits = httpx.Limits(max_connections=concurrency + 8,
                          max_keepalive_connections=concurrency + 8,
                          keepalive_expiry=idle_connection_s)
    timeout = httpx.Timeout(connect=connect_timeout_s, read=None, write=connect_timeout_s,
                            pool=None)
    if isinstance(kind, httpx.AsyncBaseTransport):
        transport: httpx.AsyncBaseTransport = kind
    elif (kind := resolve_transport(kind)) == "raw":
        from loadgen.engine.raw_http import RawTransport

        raw = RawTransport(verify=verify_tls, limits=limits)
        return RawClient(raw, timeout)
    elif kind == "aiohttp":
        transport = _aiohttp_transport(verify_tls, limits)
    elif kind == "httpx":
        transport = httpx.AsyncHTTPTransport(verify=verify_tls, limits=limits,
                                             trust_env=False)
    else:
        raise ValueError(f"unknown transport {kind!r}; choose from {TRANSPORTS}")
    return httpx.AsyncClient(transport=transport, timeout=timeout, trust_env=False,
                             follow_redirects=False)


class RawClient(httpx.AsyncClient):
    """An httpx client on the raw transport, which it names (`raw`): the engine sends its
    chat requests to it directly, everything else goes through httpx as usual."""

    def __init__(self, raw: RawTransport, timeout: httpx.Timeout) -> None:
        super().__init__(transport=raw, timeout=timeout, trust_env=False,
                         follow_redirects=False)
        self.raw = raw


def _aiohttp_transport(verify_tls: bool, limits: httpx.Limits) -> httpx.AsyncBaseTransport:
    """httpx-aiohttp's transport, with the one failure it passes on unmapped: a response
    aiohttp's parser refuses as it reads the head (a malformed head, or a malformed
    chunk that came with it) is aiohttp's ClientResponseError, no httpx error, and would
    escape the client, which promises to turn every failure into a record. It is the
    protocol error it is, as on the other transports. So is a 101 Switching Protocols
    that no request asked for (none sends Upgrade): aiohttp hands it on as the reply,
    h11 (and the raw transport) refuse it."""
    import aiohttp
    from httpx_aiohttp import AiohttpTransport

    class Transport(AiohttpTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            try:
                response = await super().handle_async_request(request)
            except aiohttp.ClientResponseError as exc:
                raise httpx.RemoteProtocolError(
                    f"{type(exc).__name__}: {exc.message}") from exc
            if response.status_code == 101:
                await response.aclose()
                raise httpx.RemoteProtocolError(
                    "101 Switching Protocols without an Upgrade request")
            return response

    return Transport(verify=verify_tls, limits=limits, trust_env=False)
