"""The transport conformance suite against real servers: one streamed chat reply (a tiny
ASGI app, tests/support/sse_app.py), plain and compressed every way a gateway does it,
served by uvicorn on h11, uvicorn on httptools, hypercorn, and nginx as a reverse proxy
in front of uvicorn (with its own gzip on, for a client that asks for it). Every
transport must read the very same record from every server, judged ok.

nginx is Debian's `nginx-light` (`.ci/nginx-tools.sh`): without it the nginx cases
skip here and fail under CI (`CI` or DSV4_QUAL_REQUIRE_NGINX set, as `.ci/run` does).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from loadgen.engine.client import Timeouts
from loadgen.records import RequestRecord
from tests.loadgen.conftest import REPO
from tests.support.chat_reads import read_in_turn, reply_of
from tests.support.scrape import free_port
from tests.support.sse_app import BODY, WIRES

TRANSPORTS = ["raw", "aiohttp", "httpx"]
TIMEOUTS = Timeouts(connect=5.0, first_token=10.0, idle=5.0, total=30.0)
REQUIRE_NGINX = "DSV4_QUAL_REQUIRE_NGINX"
NGINX_HINT = "bash .ci/nginx-tools.sh, or Debian's apt-get install nginx-light"
APP = "tests.support.sse_app:app"


def _nginx_path() -> str | None:
    """DSV4_QUAL_NGINX, else nginx on PATH, else Debian's (/usr/sbin: off a user's PATH)."""
    path = os.environ.get("DSV4_QUAL_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
    return path if Path(path).is_file() else None


def nginx_binary() -> str:
    """nginx's path; a skip without it, a failure where it is required."""
    if path := _nginx_path():
        return path
    message = f"nginx is not installed ({NGINX_HINT})"
    if os.environ.get("CI") or os.environ.get(REQUIRE_NGINX):
        pytest.fail(message)
    pytest.skip(message)


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}:\n"
                                 f"{log.read_text()[-3000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}:\n{log.read_text()[-3000:]}")


def _start(argv: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        _wait_for_port(port, proc, log)
    except BaseException:
        _stop(proc)
        raise
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stopped by its own pid: SIGTERM, then SIGKILL if it lingers."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _asgi(server: str, port: int) -> list[str]:
    if server == "hypercorn":
        return [sys.executable, "-m", "hypercorn", APP, "--bind", f"127.0.0.1:{port}"]
    http = server.split("-")[1]
    return [sys.executable, "-m", "uvicorn", APP, "--host", "127.0.0.1", "--port",
            str(port), "--http", http, "--no-access-log", "--log-level", "warning"]


def _nginx_conf(workdir: Path, port: int, upstream: int) -> Path:
    """A throwaway nginx: its own prefix, pid file, logs and temp paths, in the
    foreground; a proxy that streams (no buffering) and gzips event streams for a client
    that asks (one that does not, the raw transport, gets them as they are)."""
    temp = "".join(f"  {kind}_temp_path {workdir / kind};\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = workdir / "nginx.conf"
    conf.write_text(f"""daemon off;
worker_processes 1;
pid {workdir / 'nginx.pid'};
error_log {workdir / 'error.log'} warn;
events {{ worker_connections 64; }}
http {{
{temp}  access_log off;
  gzip on;
  gzip_types text/event-stream;
  gzip_proxied any;
  gzip_min_length 0;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://127.0.0.1:{upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }}
  }}
}}
""")
    return conf


SERVERS = ["uvicorn-h11", "uvicorn-httptools", "hypercorn", "nginx"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each server's URL (nginx's only where it is installed, else its skip or failure
    is raised by the test that asks for it)."""
    workdir = tmp_path_factory.mktemp("servers")
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for server in SERVERS[:3]:
            port = free_port()
            procs.append(_start(_asgi(server, port), port, workdir / f"{server}.log"))
            urls[server] = f"http://127.0.0.1:{port}"
        if binary := _nginx_path():
            nginx = workdir / "nginx"
            nginx.mkdir()
            port = free_port()
            upstream = int(urls["uvicorn-h11"].rsplit(":", 1)[1])
            conf = _nginx_conf(nginx, port, upstream)
            procs.append(_start([binary, "-p", str(nginx), "-c", str(conf),
                                 "-e", str(nginx / "error.log")], port,
                                nginx / "error.log"))
            urls["nginx"] = f"http://127.0.0.1:{port}"
        yield urls
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _read(transport: str, url: str) -> list[RequestRecord]:
    """One request per wire writing, in turn on one pool (kept connections reused)."""
    bodies = [orjson.dumps({**BODY, "wire": wire}) for wire in WIRES]
    return asyncio.run(read_in_turn(transport, url, bodies, TIMEOUTS))


@pytest.mark.slow
@pytest.mark.parametrize("server", SERVERS)
def test_every_transport_reads_the_same_record_from_a_real_server(
        servers: dict[str, str], server: str) -> None:
    """Every wire writing (plain, gzip in one member or one per event, zlib and raw
    deflate, a Content-Length) from `server`, read on every transport: one record, the
    same for all, judged ok."""
    if server not in servers:
        nginx_binary()  # skips, or fails where nginx is required
    replies = {(transport, wire): reply_of(record) for transport in TRANSPORTS
               for wire, record in zip(WIRES, _read(transport, servers[server]),
                                       strict=True)}
    reference = replies["httpx", "plain"]
    assert reference[1] is None and reference[-1] == ["ok"], reference
    differ = {key: reply for key, reply in replies.items() if reply != reference}
    assert differ == {}, differ


def test_ci_installs_nginx_and_requires_it() -> None:
    """.ci/run installs nginx before the slow tier and makes a missing one a failure."""
    text = (REPO / ".ci" / "run").read_text()
    install = text.index("bash .ci/nginx-tools.sh")
    require = text.index(f"export {REQUIRE_NGINX}=1")
    assert install < require < text.index("python -m pytest -m slow")


def test_a_missing_nginx_skips_here_and_fails_where_required(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSV4_QUAL_NGINX", "/nonexistent/nginx")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(Path, "is_file", lambda self: False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(REQUIRE_NGINX, raising=False)
    with pytest.raises(pytest.skip.Exception):
        nginx_binary()
    monkeypatch.setenv(REQUIRE_NGINX, "1")
    with pytest.raises(pytest.fail.Exception):
        nginx_binary()
