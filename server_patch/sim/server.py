"""Assemble the sim (builder, receipt, engine, API) and serve it with uvicorn."""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

from server_patch.c128a import builder, observe_first_call, qualified_name
from server_patch.c128a.layouts import expected_violations
from server_patch.guard import COUNT, OFF, StrideGuard
from server_patch.guard_sinks import RECEIPT_SECTION, receipt_sink
from server_patch.receipts import Receipt, tool_version
from server_patch.sim.api import SimApp
from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine

SIM_ARCHITECTURE = "dsv4-qual-sim"


def make_app(cfg: SimConfig) -> SimApp:
    """The sim's ASGI app; the engine starts with the app's lifespan.

    The builder is wrapped as the plugin wraps vLLM's: a receipt records the first
    call, and (unless `guard` is off) the stride guard counts every call, into the
    receipt and the sim's /metrics.
    """
    build = builder(cfg.layout)
    receipt = None
    if cfg.receipts_dir:
        receipt = Receipt(cfg.receipts_dir, {
            "layout": cfg.layout, "patched": True, "strict": True,
            "vllm_version": None, "server": "dsv4-qual-sim", "upstream_variant": None,
            "target": "dsv4-qual-sim C128A builder", "installed": qualified_name(build),
            "tool_version": tool_version(), "device": cfg.device,
            # One process loads the toy model and builds its one C128A group's metadata.
            "model": {"loaded": True, "architectures": [SIM_ARCHITECTURE],
                      "model_type": "dsv4_qual_sim", "model": SIM_ARCHITECTURE,
                      "c128a_builders": 1, "c128a_widths": [cfg.capacity],
                      "hooks": {"model_loader": "ok", "c128a_builders": "ok"}},
        })
        receipt.write()
        build = observe_first_call(build, lambda info: receipt.update(first_call=info))
    guard = StrideGuard(COUNT if cfg.guard else OFF,
                        sinks=[receipt_sink(lambda: receipt)], flush_interval_s=1.0,
                        expected=expected_violations(cfg.layout, "this sim"))
    build = guard.wrap(build)
    if receipt is not None and guard.enabled:
        receipt.merge_section(RECEIPT_SECTION, guard.snapshot())
    app = SimApp(cfg, Engine(cfg, build), guard.snapshot if guard.enabled else None)
    app.on_shutdown = guard.flush
    return app


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def serve(cfg: SimConfig, sock: socket.socket) -> None:
    """Serve on a bound socket in the foreground until interrupted (`dsv4-qual sim`)."""
    sim = make_app(cfg)
    uvicorn.Server(uvicorn.Config(sim.app, log_level="warning")).run(sockets=[sock])


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
                    timeout_s: float = 60.0) -> RunningSim:
    sim = make_app(cfg)
    sock = bind(host, port)
    server = uvicorn.Server(uvicorn.Config(sim.app, log_level="critical",
                                           timeout_keep_alive=60))
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
    import tempfile

    return tempfile.mkdtemp(prefix=f"dsv4-qual-sim-receipts-{os.getpid()}-")
