"""Wait until a server can take requests: GET /health, then GET /v1/models.

An ingress that routes only `/v1` answers /health with 404 (or 405): readiness is then
judged by GET /v1/models alone, and the wait and the run's facts say so.

vLLM listens only once its engine is up (a server loading its model refuses
connections), and /health alone answers 200 before the first request would succeed on
some versions, so both must pass. A wrong address must not look like a slow start:
every failed probe is put in one of three classes (nothing listening, no such host, up
but not ready) and the waiting lines say which. A refused connection is waited out (it
is what a loading vLLM shows); a name that does not resolve gives up after a short
grace instead of the whole ready timeout (in compose a service's name resolves as soon
as its container exists).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from loadgen.exit_codes import RunInvalidError

#: How long a host name may fail to resolve before the wait gives up on it.
DNS_GRACE_S = 20.0
HEARTBEAT_S = 10.0
#: What changes the wait of `dsv4-qual run` (the restart wait names its own key).
READY_TIMEOUT_FLAG = "--ready-timeout SECONDS"

NotReadyKind = Literal["waiting", "refused", "no_such_host", "up_not_ready", "plain_http",
                       "tls_untrusted", "other"]

#: What a TLS handshake reads when the other end answers in plain HTTP (OpenSSL's
#: reasons, by release): an https:// URL for a server that has no TLS.
PLAIN_HTTP_REASONS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE",
                                "PACKET_LENGTH_TOO_LONG", "UNKNOWN_PROTOCOL",
                                "HTTP_REQUEST"})
#: Answers that waiting cannot change: the wait ends at the first one, with its hint.
FINAL_KINDS: frozenset[NotReadyKind] = frozenset({"plain_http", "tls_untrusted"})


#: What /health answers where it is not routed to the server (an ingress of /v1 only).
NOT_ROUTED = frozenset({404, 405})
BOTH_PROBES = "GET /health and GET /v1/models"


@dataclass(frozen=True)
class ServerReady:
    base_url: str
    models: dict[str, Any]
    waited_s: float
    #: How readiness was judged: BOTH_PROBES, or /v1/models alone and why.
    readiness: str = BOTH_PROBES

    @property
    def model_ids(self) -> list[str]:
        return [m["id"] for m in self.models.get("data", [])
                if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def max_model_len(self, model: str) -> int | None:
        for m in self.models.get("data", []):
            if isinstance(m, dict) and m.get("id") == model:
                value = m.get("max_model_len")
                return value if isinstance(value, int) else None
        return None


def host_and_port(base_url: str) -> tuple[str, int | None]:
    """The host and port a base URL connects to (the scheme's default port if none)."""
    url = httpx.URL(base_url)
    return url.host, url.port or {"http": 80, "https": 443}.get(url.scheme)


def classify_failure(exc: BaseException, base_url: str) -> tuple[NotReadyKind, str]:
    """Why a probe got no HTTP answer, in the words a user acts on.

    Both transports wrap the socket's error (httpx in ConnectError, httpx-aiohttp in
    ConnectTimeout), so the chain of causes is searched for it."""
    host, port = host_and_port(base_url)
    seen: set[int] = set()
    err: BaseException | None = exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, socket.gaierror):
            return "no_such_host", f"no such host {host}"
        if isinstance(err, ConnectionRefusedError):
            return "refused", f"nothing listening on {host}:{port} (connection refused)"
        # aiohttp's wrappers subclass ssl's errors without their fields: read the cause.
        reason = getattr(err, "reason", None)
        if isinstance(err, ssl.SSLCertVerificationError) and reason is not None:
            why = getattr(err, "verify_message", None) or reason
            return "tls_untrusted", (f"the TLS certificate of {host}:{port} is not trusted "
                                     f"({why})")
        if isinstance(err, ssl.SSLError) and reason in PLAIN_HTTP_REASONS:
            return "plain_http", f"{host}:{port} answers in plain HTTP, not TLS"
        err = err.__cause__ or err.__context__
    cause = exc.__cause__ or exc
    return "other", f"{type(cause).__name__}: {cause}"[:300]


class Probe:
    """The last readiness answer, kept so that 'not ready' can say why."""

    def __init__(self) -> None:
        self.kind: NotReadyKind = "waiting"
        self.reason = "no answer yet"
        #: Set once /health answered 404 or 405: it is not routed here, so /v1/models
        #: alone says whether the server is ready.
        self.without_health: str | None = None

    @property
    def readiness(self) -> str:
        if self.without_health is None:
            return BOTH_PROBES
        return f"GET /v1/models alone ({self.without_health}: not routed to the server)"

    def _not_ready(self, what: str) -> None:
        self.kind = "up_not_ready"
        self.reason = f"up but not ready ({what})"

    async def __call__(self, http: httpx.AsyncClient, base_url: str,
                       timeout: float = 10.0) -> dict[str, Any] | None:
        """The /v1/models document if the server is ready now, else None."""
        try:
            if self.without_health is None:
                health = await http.get(f"{base_url}/health", timeout=timeout)
                if health.status_code in NOT_ROUTED:
                    self.without_health = f"GET /health answered {health.status_code}"
                elif health.status_code != 200:
                    self._not_ready(f"GET /health answered {health.status_code}")
                    return None
            models = await http.get(f"{base_url}/v1/models", timeout=timeout)
            if models.status_code != 200:
                self._not_ready(f"GET /v1/models answered {models.status_code}")
                return None
            data = models.json()
        except (httpx.HTTPError, OSError) as exc:
            self.kind, self.reason = classify_failure(exc, base_url)
            return None
        except ValueError:
            self._not_ready("GET /v1/models did not return JSON")
            return None
        if not isinstance(data, dict) or not data.get("data"):
            self._not_ready("GET /v1/models lists no model")
            return None
        return data


async def probe(http: httpx.AsyncClient, base_url: str,
                timeout: float = 10.0) -> dict[str, Any] | None:
    return await Probe()(http, base_url, timeout)


def _fix(kind: NotReadyKind, base_url: str) -> str:
    """What to change, for an answer no wait will change."""
    if kind == "plain_http":
        plain = "http://" + base_url.removeprefix("https://")
        return f"use {plain} (http://, not https://)"
    return ("trust its CA (SSL_CERT_FILE=ca.pem) or, knowing what that means, --insecure; "
            "waiting cannot change a certificate")


def _while_waiting(kind: NotReadyKind, dns_grace_s: float) -> str:
    """What the wait does about a class of answer (said once, when the class appears)."""
    if kind == "refused":
        return "waiting: a server still loading its model refuses connections"
    if kind == "no_such_host":
        return f"giving up in {dns_grace_s:g} s unless the name resolves: check the address"
    if kind == "up_not_ready":
        return "waiting: the server is starting"
    return "waiting"


async def wait_ready(
    http: httpx.AsyncClient, base_url: str, timeout_s: float, interval_s: float = 1.0,
    say: Callable[[str], None] | None = None, heartbeat_s: float = HEARTBEAT_S,
    dns_grace_s: float | None = None, how_to_wait: str = READY_TIMEOUT_FLAG,
) -> ServerReady:
    """Poll until ready; after `timeout_s` the run is invalid (exit 2).

    `say` hears what is awaited at once (a server that never answers must not look like
    a hung client), which class of answer the server gives whenever it changes (nothing
    listening, no such host, up but not ready), then a heartbeat every `heartbeat_s`.
    A host name that has not resolved for `dns_grace_s` (default DNS_GRACE_S; math.inf
    waits it out, as a restart wait does for a container coming back) ends the wait
    early: a typo must not hold a run for its whole ready timeout. `how_to_wait` names
    the setting that changes the wait.
    """
    grace = DNS_GRACE_S if dns_grace_s is None else dns_grace_s
    start = time.monotonic()
    deadline = start + timeout_s
    check = Probe()
    next_beat = start + heartbeat_s
    said_kind: str | None = None
    said_without_health = False
    unresolved_since: float | None = None
    if say is not None:
        say(f"waiting for {base_url} to be ready (GET /health and /v1/models), "
            f"up to {timeout_s:g} s ({how_to_wait} changes it)")
    while True:
        models = await check(http, base_url, timeout=min(10.0, max(timeout_s, 0.1)))
        if check.without_health is not None and not said_without_health and say is not None:
            said_without_health = True
            say(f"{base_url}: readiness is judged by {check.readiness}")
        if models is not None:
            if say is not None and time.monotonic() - start >= 1.0:
                say(f"{base_url} is ready after {time.monotonic() - start:.0f} s")
            return ServerReady(base_url, models, time.monotonic() - start, check.readiness)
        now = time.monotonic()
        if check.kind in FINAL_KINDS:
            raise RunInvalidError(f"server {base_url} not ready: {check.reason}; "
                                  f"{_fix(check.kind, base_url)}")
        if check.kind == "no_such_host":
            unresolved_since = now if unresolved_since is None else unresolved_since
            if now - unresolved_since >= grace:
                raise RunInvalidError(
                    f"server {base_url} not ready: {check.reason} (the name did not resolve "
                    f"for {grace:g} s; check the address)")
        else:
            unresolved_since = None
        if say is not None and check.kind != said_kind and now < deadline:
            said_kind = check.kind
            say(f"{base_url}: {check.reason}; {_while_waiting(check.kind, grace)}")
            next_beat = now + heartbeat_s
        if say is not None and now >= next_beat and now < deadline:
            what = (f"giving up in {grace - (now - unresolved_since):.0f} s unless it "
                    "resolves" if unresolved_since is not None else
                    f"{how_to_wait} changes the wait")
            say(f"still waiting for {base_url}: {now - start:.0f} s of {timeout_s:g} s, "
                f"{check.reason} ({what})")
            next_beat = now + heartbeat_s
        if time.monotonic() >= deadline:
            raise RunInvalidError(
                f"server {base_url} not ready after {timeout_s:g} s: {check.reason} "
                f"({check.readiness} must answer 200; {how_to_wait} "
                "waits longer)")
        await asyncio.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))


def choose_model(requested: str, ready: ServerReady) -> str:
    """`auto` takes the first served model; a named one must be served."""
    ids = ready.model_ids
    if requested == "auto":
        if not ids:
            raise RunInvalidError(f"server {ready.base_url} serves no model")
        return ids[0]
    if requested not in ids:
        raise RunInvalidError(
            f"server {ready.base_url} does not serve model {requested!r} (it serves {ids})"
        )
    return requested
