"""The HTTP stack under httpx: the plug point for a faster transport.

The code talks to httpx.AsyncClient only; what moves the bytes is chosen here, or given:
an `httpx.AsyncBaseTransport` passed in its place (an `httpx.MockTransport`, an ASGI app's
transport) answers every request the engine sends, so an engine test that needs only
replies starts no server.
`aiohttp` (from httpx-aiohttp) costs a fraction of the CPU of httpx's default
httpcore + h11 + anyio stack per streamed request; `httpx` is the reference stack.
Neither reads proxy settings or .netrc from the environment (trust_env off): a
benchmark client must not pay a file lookup per request, and a qualification run
must go where the scenario says.
"""

from __future__ import annotations

import httpx

TRANSPORTS = ("auto", "aiohttp", "httpx")


def _aiohttp_available() -> bool:
    try:
        import httpx_aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_transport(kind: str) -> str:
    if kind == "auto":
        return "aiohttp" if _aiohttp_available() else "httpx"
    return kind


#: A transport by name (TRANSPORTS), or one given whole.
Transport = str | httpx.AsyncBaseTransport


def make_http_client(kind: Transport, concurrency: int, verify_tls: bool,
                     connect_timeout_s: float) -> httpx.AsyncClient:
    """One client per run; its connection pool is sized to the concurrency."""
    limits = httpx.Limits(max_connections=concurrency + 8,
                          max_keepalive_connections=concurrency + 8)
    timeout = httpx.Timeout(connect=connect_timeout_s, read=None, write=connect_timeout_s,
                            pool=None)
    if isinstance(kind, httpx.AsyncBaseTransport):
        transport: httpx.AsyncBaseTransport = kind
    elif (kind := resolve_transport(kind)) == "aiohttp":
        from httpx_aiohttp import AiohttpTransport

        transport = AiohttpTransport(
            verify=verify_tls, limits=limits, trust_env=False)
    elif kind == "httpx":
        transport = httpx.AsyncHTTPTransport(verify=verify_tls, limits=limits,
                                             trust_env=False)
    else:
        raise ValueError(f"unknown transport {kind!r}; choose from {TRANSPORTS}")
    return httpx.AsyncClient(transport=transport, timeout=timeout, trust_env=False,
                             follow_redirects=False)
