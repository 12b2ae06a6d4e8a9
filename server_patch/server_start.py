"""Which server start a process belongs to: one id per start, shared by every process of it.

Receipts outlive servers (a Docker volume keeps yesterday's), and one receipt directory
may collect the receipts of several servers (data-parallel replicas on one volume). A
receipt proves something about the server the load generator measured only if it names
the start of the server that wrote it, and that server names the same start on the
endpoint that was measured. So:

- the first process of a start that loads the plugin (vLLM's API server, or the launcher
  of several API servers; it loads plugins while it parses its command line, before it
  starts anything) makes a random id and puts it in the environment, with its own pid
  and start time; every process it starts (engine cores, workers, more API servers)
  inherits them and takes the id;
- a process that finds an id whose maker is not itself or one of its ancestors (an id
  left in a container's environment, or set by hand on another node) does not take it:
  it makes its own. So a restart always gets a new id, and a node whose model processes
  serve through another node's endpoint (vLLM's ``--headless``) never passes for that
  endpoint's start: the load generator then sees ranks it cannot tie, and says so;
- every process registers the Prometheus gauge ``dsv4_qual_server_info{server_id,
  address}``. vLLM serves on /metrics either the API server's own registry (one API
  server) or what every process wrote into ``PROMETHEUS_MULTIPROC_DIR`` (several API
  servers); the gauge is in both.

The address is what the start serves as its command line says it (``--host``/``--port``,
``--uds``; nothing for ``--headless``): for people reading a receipt. The load generator
ties receipts by id, read from the endpoint it measured; host names and ports seen from
the load generator's side of a container or a proxy need not match the server's own.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import uuid
import weakref
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_SERVER_ID = "DSV4_QUAL_SERVER_ID"
#: ``<pid>:<start time in clock ticks>`` of the process that made the id.
ENV_SERVER_MAKER = "DSV4_QUAL_SERVER_MAKER"
ENV_SERVER_ADDRESS = "DSV4_QUAL_SERVER_ADDRESS"
#: The receipt section this module fills.
SECTION = "server"
#: The gauge on /metrics that names the start (the load generator reads it by this name).
METRIC = "dsv4_qual_server_info"
METRIC_LABELS = ("server_id", "address")
DEFAULT_PORT = "8000"
# Deeper than any process tree vLLM makes (launcher, API server, engine core, worker).
_MAX_ANCESTORS = 64


@dataclass(frozen=True)
class ServerStart:
    """This process's server start, as its receipt and /metrics state it."""

    id: str
    address: str | None
    maker_pid: int
    made_here: bool
    note: str | None = None  # why an id found in the environment was not taken

    def section(self) -> dict[str, Any]:
        section: dict[str, Any] = {"id": self.id, "address": self.address,
                                   "maker_pid": self.maker_pid, "made_here": self.made_here}
        if self.note:
            section["note"] = self.note
        return section


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) from /proc, or None where it cannot be read."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _maker_is_ancestor(maker: str) -> tuple[bool, str | None]:
    """Is the process named by ``maker`` (``pid:start``) this one or one of its ancestors?"""
    pid_text, _, start_text = maker.partition(":")
    try:
        maker_pid, maker_start = int(pid_text), int(start_text)
    except ValueError:
        return False, f"{ENV_SERVER_MAKER}={maker!r} is not <pid>:<start>"
    pid = os.getpid()
    for _ in range(_MAX_ANCESTORS):
        stat = _proc_stat(pid)
        if stat is None:
            return False, f"cannot read /proc/{pid}/stat to check who made the id"
        if pid == maker_pid:
            if stat[1] == maker_start:
                return True, None
            return False, f"process {maker_pid} is not the one that made the id (pid reused)"
        if pid <= 1:
            break
        pid = stat[0]
    return False, (f"the id was made by process {maker_pid}, which is not an ancestor of this "
                   "one (an id left in the environment, or set by hand)")


def address_from_argv(argv: Sequence[str]) -> str | None:
    """What a ``vllm serve`` command line listens on; None when it serves no API."""
    if "--headless" in argv or not any(a == "serve" or "api_server" in a for a in argv):
        return None
    values: dict[str, str] = {}
    for i, arg in enumerate(argv):
        for flag in ("--host", "--port", "--uds"):
            if arg == flag and i + 1 < len(argv):
                values[flag] = argv[i + 1]
            elif arg.startswith(flag + "="):
                values[flag] = arg.split("=", 1)[1]
    if values.get("--uds"):
        return f"unix:{values['--uds']}"
    return f"{values.get('--host') or '0.0.0.0'}:{values.get('--port') or DEFAULT_PORT}"


def resolve(environ: MutableMapping[str, str], argv: Sequence[str]) -> ServerStart:
    """Take the start inherited from an ancestor, or make one and hand it down.

    Writes the id into ``environ`` (``os.environ`` for the real process) when it makes
    one, so that every process this one starts inherits it.
    """
    inherited = environ.get(ENV_SERVER_ID, "").strip()
    note = None
    if inherited:
        ours, note = _maker_is_ancestor(environ.get(ENV_SERVER_MAKER, ""))
        if ours:
            maker_pid = int(environ[ENV_SERVER_MAKER].split(":", 1)[0])
            return ServerStart(inherited, environ.get(ENV_SERVER_ADDRESS) or None, maker_pid,
                               made_here=False)
    pid = os.getpid()
    stat = _proc_stat(pid)
    start = ServerStart(uuid.uuid4().hex, address_from_argv(argv), pid, made_here=True,
                        note=f"not taken: {ENV_SERVER_ID} found in the environment: {note}"
                        if note else None)
    environ[ENV_SERVER_ID] = start.id
    environ[ENV_SERVER_MAKER] = f"{pid}:{stat[1] if stat else 0}"
    environ[ENV_SERVER_ADDRESS] = start.address or ""
    return start


_LOCK = threading.Lock()
_CURRENT: dict[int, ServerStart] = {}


def current() -> ServerStart:
    """This process's start (worked out once per process; a forked child checks again)."""
    with _LOCK:
        start = _CURRENT.get(os.getpid())
        if start is None:
            start = resolve(os.environ, sys.argv)
            _CURRENT.clear()
            _CURRENT[os.getpid()] = start
        return start


_GAUGES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _gauge(prometheus_client: Any, registry: Any) -> Any:
    gauge = _GAUGES.get(registry)
    if gauge is None:
        try:
            # "max": several processes of one start write the same sample into vLLM's
            # multiprocess directory; /metrics then shows it once, without a pid label.
            gauge = prometheus_client.Gauge(
                METRIC, "The dsv4-qual server start this process belongs to (value 1)",
                list(METRIC_LABELS), registry=registry, multiprocess_mode="max")
        except ValueError:  # registered already (by an earlier copy of this module)
            gauge = getattr(registry, "_names_to_collectors", {}).get(METRIC)
            if gauge is None:
                raise
        _GAUGES[registry] = gauge
    return gauge


def export_metric(start: ServerStart, log: logging.Logger,
                  registry: Any = None) -> bool:
    """Set ``dsv4_qual_server_info{server_id, address} 1``; False where it cannot.

    Never raises: a server that cannot export its id still serves, and the load
    generator, which then cannot tie its receipts, says so.
    """
    try:
        import prometheus_client
    except ImportError:
        return False
    try:
        with _LOCK:
            gauge = _gauge(prometheus_client,
                           prometheus_client.REGISTRY if registry is None else registry)
            gauge.labels(server_id=start.id, address=start.address or "").set(1)
        return True
    except Exception:
        log.warning("dsv4-qual: could not export %s on /metrics", METRIC, exc_info=True)
        return False


def metric_lines(start: ServerStart | Mapping[str, Any]) -> list[str]:
    """The gauge in Prometheus text, for a server that writes its /metrics itself (the sim)."""
    section = start.section() if isinstance(start, ServerStart) else start
    return [
        f"# HELP {METRIC} The dsv4-qual server start this process belongs to (value 1)",
        f"# TYPE {METRIC} gauge",
        f'{METRIC}{{server_id="{section["id"]}",address="{section.get("address") or ""}"}} 1',
    ]
