"""Wait until a server can take requests: GET /health, then GET /v1/models.

vLLM opens its port long before the engine is ready, and /health alone answers 200
before the first request would succeed on some versions, so both must pass.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from loadgen.exit_codes import RunInvalidError


@dataclass(frozen=True)
class ServerReady:
    base_url: str
    models: dict[str, Any]
    waited_s: float

    @property
    def model_ids(self) -> list[str]:
        return [m.get("id") for m in self.models.get("data", []) if isinstance(m, dict)]

    def max_model_len(self, model: str) -> int | None:
        for m in self.models.get("data", []):
            if isinstance(m, dict) and m.get("id") == model:
                value = m.get("max_model_len")
                return value if isinstance(value, int) else None
        return None


class Probe:
    """The last readiness answer, kept so that 'not ready' can say why."""

    def __init__(self) -> None:
        self.reason = "no answer yet"

    async def __call__(self, http: httpx.AsyncClient, base_url: str,
                       timeout: float = 10.0) -> dict | None:
        """The /v1/models document if the server is ready now, else None."""
        try:
            health = await http.get(f"{base_url}/health", timeout=timeout)
            if health.status_code != 200:
                self.reason = f"GET /health answered {health.status_code}"
                return None
            models = await http.get(f"{base_url}/v1/models", timeout=timeout)
            if models.status_code != 200:
                self.reason = f"GET /v1/models answered {models.status_code}"
                return None
            data = models.json()
        except (httpx.HTTPError, OSError) as exc:
            cause = exc.__cause__ or exc
            self.reason = f"{type(cause).__name__}: {cause}"[:300]
            return None
        except ValueError:
            self.reason = "GET /v1/models did not return JSON"
            return None
        if not isinstance(data, dict) or not data.get("data"):
            self.reason = "GET /v1/models lists no model"
            return None
        return data


async def probe(http: httpx.AsyncClient, base_url: str, timeout: float = 10.0) -> dict | None:
    return await Probe()(http, base_url, timeout)


HEARTBEAT_S = 10.0


async def wait_ready(
    http: httpx.AsyncClient, base_url: str, timeout_s: float, interval_s: float = 1.0,
    say: Callable[[str], None] | None = None, heartbeat_s: float = HEARTBEAT_S,
) -> ServerReady:
    """Poll until ready; after `timeout_s` the run is invalid (exit 2).

    `say` hears what is awaited at once (a server that never answers must not look like
    a hung client), then a heartbeat every `heartbeat_s` with the last answer.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    check = Probe()
    next_beat = start + heartbeat_s
    if say is not None:
        say(f"waiting for {base_url} to be ready (GET /health and /v1/models), "
            f"up to {timeout_s:g} s")
    while True:
        models = await check(http, base_url, timeout=min(10.0, max(timeout_s, 0.1)))
        if models is not None:
            if say is not None and time.monotonic() - start >= 1.0:
                say(f"{base_url} is ready after {time.monotonic() - start:.0f} s")
            return ServerReady(base_url, models, time.monotonic() - start)
        now = time.monotonic()
        if say is not None and now >= next_beat and now < deadline:
            say(f"still waiting for {base_url}: {now - start:.0f} s of {timeout_s:g} s "
                f"(last: {check.reason})")
            next_beat = now + heartbeat_s
        if time.monotonic() >= deadline:
            raise RunInvalidError(
                f"server {base_url} not ready after {timeout_s:g} s "
                f"(GET /health and GET /v1/models must both answer 200; last: {check.reason})"
            )
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
