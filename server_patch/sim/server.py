"""Assemble the sim (builder, receipt, engine, API) and serve it with uvicorn."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import uvicorn

from server_patch.c128a import builder, observe_first_call, qualified_name
from server_patch.c128a.layouts import expected_violations
from server_patch.guard import COUNT, OFF, StrideGuard
from server_patch.guard_sinks import RECEIPT_SECTION, receipt_sink
from server_patch.receipts import Receipt, tool_version
from server_patch.server_start import ServerStart
from server_patch.sim.api import SimApp
from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine

SIM_ARCHITECTURE = "dsv4-qual-sim"
#: How often, at most, the stride guard's counts reach the receipt while the builder runs
#: (for people watching it); the gate relies on the flush as each request finishes.
GUARD_FLUSH_S = 1.0
#: Idle connections are closed after this long, as vLLM closes them
#: (VLLM_HTTP_TIMEOUT_KEEP_ALIVE=5): a client that thinks longer must not reuse one.
KEEP_ALIVE_S = 5


#: The sim is one process: one data-parallel rank, one worker (the model watch's names).
SIM_PARALLEL = {"data_parallel_size": 1, "data_parallel_size_local": 1,
                "data_parallel_rank": 0, "data_parallel_index": 0,
                "data_parallel_external_lb": False, "data_parallel_hybrid_lb": False,
                "world_size": 1, "rank": 0, "tensor_parallel_size": 1,
                "pipeline_parallel_size": 1, "nnodes": 1, "node_rank": 0}


def new_start(address: str | None) -> ServerStart:
    """Each app is a server start of its own: a fresh id, as the plugin makes per start."""
    return ServerStart(uuid.uuid4().hex, address, os.getpid(), made_here=True)


def make_app(cfg: SimConfig, address: str | None = None,
             log: logging.Logger | None = None) -> SimApp:
    """The sim's ASGI app; the engine starts with the app's lifespan.

    The builder is wrapped as the plugin wraps vLLM's: a receipt records the first
    call, and (unless `guard` is off) the stride guard counts every call, into the
    receipt and the sim's /metrics. The receipt and /metrics name the same server
    start (`server_start`), as the plugin's do, so the load generator ties the one to
    the other. The guard's lines go to `log` (its own logger by default; a quiet run
    gives one that writes nothing: the receipt keeps what the guard saw).

    The guard's counts reach the receipt in every step in which requests finish, before
    their replies end, not only on its periodic flush: the load generator reads the
    receipt once the replies it judges have ended, and a periodic flush still to come
    then (a run shorter than its interval had none at all) made a healthy round read
    "0 builder calls" and come out invalid.
    """
    build = builder(cfg.layout)
    start = new_start(address)
    receipt = None
    if cfg.receipts_dir:
        receipt = Receipt(cfg.receipts_dir, {
            "layout": cfg.layout, "patched": True, "strict": True,
            "vllm_version": None, "server_kind": "dsv4-qual-sim", "upstream_variant": None,
            "target": "dsv4-qual-sim C128A builder", "installed": qualified_name(build),
            "tool_version": tool_version(), "device": cfg.device,
            "server": start.section(),
            # One process loads the toy model and builds its one C128A group's metadata.
            "model": {"loaded": True, "architectures": [SIM_ARCHITECTURE],
                      "model_type": "dsv4_qual_sim", "model": cfg.model, "revision": None,
                      "compress_ratios": None, "parallel": SIM_PARALLEL,
                      "c128a_builders": 1, "c128a_widths": [cfg.capacity],
                      "hooks": {"model_loader": "ok", "c128a_builders": "ok"}},
        })
        receipt.write()
        build = observe_first_call(build, lambda info: receipt.update(first_call=info))
    guard = StrideGuard(COUNT if cfg.guard else OFF,
                        sinks=[receipt_sink(lambda: receipt)], flush_interval_s=GUARD_FLUSH_S,
                        expected=expected_violations(cfg.layout, "this sim"), log=log)
    build = guard.wrap(build)
    if receipt is not None and guard.enabled:
        receipt.merge_section(RECEIPT_SECTION, guard.snapshot())
    publish = guard.flush if receipt is not None and guard.enabled else None
    app = SimApp(cfg, Engine(cfg, build, on_replies_end=publish),
                 guard.snapshot if guard.enabled else None)
    app.on_shutdown = guard.flush
    app.server_start = start.section()
    return app


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def address_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def serve(cfg: SimConfig, sock: socket.socket) -> None:
    """Serve on a bound socket in the foreground until interrupted (`dsv4-qual sim`)."""
    sim = make_app(cfg, address_of(sock))
    uvicorn.Server(uvicorn.Config(sim.app, log_level="warning",
                                  timeout_keep_alive=KEEP_ALIVE_S)).run(sockets=[sock])


@dataclass
class RunningSim:
    """A sim served from a background thread of this process."""

    base_url: str
    receipts_dir: str | None
    server: Any
    thread: threading.Thread
    sock: socket.socket
    sim: SimApp

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()


def start_in_thread(cfg: SimConfig, host: str = "127.0.0.1", port: int = 0,
                    timeout_s: float = 60.0, log: logging.Logger | None = None) -> RunningSim:
    sock = bind(host, port)
    sim = make_app(cfg, address_of(sock), log)
    server = uvicorn.Server(uvicorn.Config(sim.app, log_level="critical",
                                           timeout_keep_alive=KEEP_ALIVE_S))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name="dsv4-qual-sim", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the embedded sim did not start")
        time.sleep(0.01)
    url = f"http://{host}:{sock.getsockname()[1]}"
    return RunningSim(url, cfg.receipts_dir, server, thread, sock, sim)


def default_receipts_dir() -> str:
    """A fresh receipts folder in the temp dir; the caller removes it when done."""
    import tempfile

    return tempfile.mkdtemp(prefix=f"dsv4-qual-sim-receipts-{os.getpid()}-")
