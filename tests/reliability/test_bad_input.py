"""Bad bytes from a server and bad input from a user: never a traceback."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadgen.engine.client import Timeouts, _StreamState
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from tests.loadgen.conftest import run_cli
from tests.support.openai_fake import FakeOpenAI
from tests.support.scenario_files import write_scenario

SSE_PIECES = [b"data: ", b"[DONE]", b"\n", b"\r\n", b"\n\n", b"event: error\n", b": ping\n",
              b'{"choices":[{"delta":{"reasoning":"x"}}]}', b'{"error":{"message":"e"}}',
              b'{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}',
              b'{"choices":[{"finish_reason":"length","delta":{}}]}', b'{"usage":{"x":1}}',
              b"\xff\xfe", b"{", b"}", b"null", b"[]", b'{"choices":"no"}',
              b'{"choices":[{"delta":{"content":5}}]}', b'{"choices":[null]}']


class _Response:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def aiter_bytes(self):
        for c in self.chunks:
            yield c


class _Dog:
    def arm(self, deadline: float, reason: str) -> None:
        pass


async def _consume(chunks: list[bytes]) -> RequestRecord:
    rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                        endpoint="http://x", item_id="i", status=200)
    loop = asyncio.get_running_loop()
    state = _StreamState(rec, loop, loop.time())
    await state.consume(_Response(chunks), _Dog(), Timeouts(1, 1, 1, 1), loop.time() + 10)
    state.finish_timings()
    return rec


chunk_lists = st.lists(st.one_of(st.sampled_from(SSE_PIECES), st.binary(max_size=40)),
                       max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk_lists)
def test_any_bytes_end_as_a_record_never_an_exception(chunks: list[bytes]) -> None:
    rec = asyncio.run(_consume(chunks))
    verdicts = classify(rec, VerdictConfig())
    assert verdicts and all(isinstance(v, str) for v in verdicts)
    rec.to_json()  # whatever arrived, the record serialises


def test_typed_garbage_in_a_well_formed_stream_is_a_stream_error() -> None:
    chunks = [b'data: {"choices":[{"delta":{"content":5}}]}\n\n', b"data: [DONE]\n\n"]
    rec = asyncio.run(_consume(chunks))
    assert rec.content == ""  # a number is not text; it is not glued into the content


# -- TLS --------------------------------------------------------------------------------


@pytest.fixture
def https_server(tmp_path: Path):
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    fake = FakeOpenAI(("ok",))
    config = uvicorn.Config(fake.app, host="127.0.0.1", port=0, log_level="critical",
                            ssl_certfile=str(cert_file), ssl_keyfile=str(key_file))
    server = uvicorn.Server(config)
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"https://127.0.0.1:{port}", fake
    server.should_exit = True
    thread.join(10)


SC = {"target": {"ready_timeout_s": 3}, "load": {"concurrency": 2, "measurement": 4},
      "request": {"max_tokens": 32}, "gate": {"min_measured": 4}}


def test_tls_is_verified_by_default(https_server, tmp_path: Path) -> None:
    url, fake = https_server
    sc = write_scenario(tmp_path / "t.toml", SC)
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(tmp_path / "o"), "--quiet")
    assert proc.returncode == 2
    assert "certificate" in proc.stdout.lower() or "ssl" in proc.stdout.lower(), proc.stdout
    assert sum(fake.counts.values()) == 0


def test_insecure_turns_verification_off_with_a_warning(https_server, tmp_path: Path) -> None:
    url, fake = https_server
    sc = write_scenario(tmp_path / "t.toml", SC)
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(tmp_path / "o"), "--quiet",
                   "--insecure")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TLS certificate verification is OFF" in proc.stderr
    assert fake.counts["ok"] == 4


# -- addresses that cannot work: refused before anything waits, or at the first answer ---


def _line(proc) -> str:
    (line,) = [x for x in proc.stdout.splitlines() if "RUN INVALID" in x]
    return line


def test_an_untrusted_certificate_ends_the_wait_at_once(https_server, tmp_path: Path) -> None:
    url, fake = https_server
    sc = write_scenario(tmp_path / "t.toml", SC, target={"ready_timeout_s": 600})
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    line = _line(proc)
    # Not waited out: no "after 600 s"; the reason and both ways out are named.
    assert f"server {url} not ready: the TLS certificate of 127.0.0.1:" in line, line
    assert "is not trusted" in line and "SSL_CERT_FILE" in line and "--insecure" in line
    assert "after 600 s" not in line and sum(fake.counts.values()) == 0


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_https_to_a_plain_http_server_ends_the_wait_with_the_url_to_use(
        fake_server, tmp_path: Path, transport: str) -> None:
    fake, srv = fake_server(("ok",))
    url = srv.url.replace("http://", "https://")
    sc = write_scenario(tmp_path / "t.toml", SC, target={"ready_timeout_s": 600})
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(tmp_path / "o"),
                   "--transport", transport)
    assert proc.returncode == 2
    line = _line(proc)
    port = srv.url.rsplit(":", 1)[1]
    assert (f"server {url} not ready: 127.0.0.1:{port} answers in plain HTTP, not TLS; "
            f"use {srv.url} (http://, not https://)") in line, line
    assert sum(fake.counts.values()) == 0


def _bad_base_urls() -> list[tuple[str, str]]:
    """Addresses users paste, each refused for its own reason, over hosts and schemes."""
    cases = []
    for scheme in ("http", "https"):
        for host in ("127.0.0.1", "gpu-a.example", "[::1]"):
            root = f"{scheme}://{host}:8000"
            for tail in ("/v1", "/v1/", "/v1/chat/completions", "/v1/models"):
                cases.append((root + tail, f"without /v1 (dsv4-qual adds /v1/...): use "
                                           f"{root!r}"))
            cases.append((f"{scheme}://{host}:8000/gw/v1", f"use '{root}/gw'"))
            for port in ("0", "65536", "99999", "80a", "-1"):
                cases.append((f"{scheme}://{host}:{port}",
                              "the port must be a number from 1 to 65535"))
            cases.append((f"{root}/?model=x", "has no ?query or #fragment"))
        cases.append((f"{scheme}://:8000", "names no host"))
    return cases


def test_a_base_url_that_cannot_reach_a_server_is_bad_input(tmp_path: Path) -> None:
    sc = write_scenario(tmp_path / "t.toml", SC)
    for url, said in _bad_base_urls():
        proc = run_cli("run", str(sc), "--base-url", url, "--out", str(tmp_path / "o"))
        assert proc.returncode == 3, (url, proc.stdout, proc.stderr)
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"dsv4-qual: error: command line: target.base_urls: {url!r}")
        assert said in line, (url, line)
        assert not (tmp_path / "o").exists()  # refused before a results folder is made
    # The same rules for a scenario file's own URLs.
    write_scenario(sc, SC, target={"base_urls": ["http://h:8000/v1"]})
    proc = run_cli("validate", str(sc))
    assert proc.returncode == 3 and "use 'http://h:8000'" in proc.stderr


def test_base_urls_that_work_stay_as_they_were(tmp_path: Path) -> None:
    from loadgen.scenario import http_urls

    good = ["http://127.0.0.1:8000", "https://gw.example/deepseek", "http://[::1]:8000/",
            "http://h:1", "http://h:65535", "https://h", "http://h/v1beta"]
    assert http_urls(good) == [u.rstrip("/") for u in good]


# -- secrets -----------------------------------------------------------------------------


def test_the_key_never_reaches_any_output(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok", "http_500", "stuck"))
    secret = "sk-qual-3b1d7a-NEVER-WRITTEN"
    # Every third request is an HTTP 500: the rate is of the replies.
    sc = write_scenario(tmp_path / "k.toml", SC, target={"api_key_env": "QUAL_KEY"},
                        gate={"min_measured": 2, "max_infra_errors": 4})
    out = tmp_path / "o"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out),
                   env={"QUAL_KEY": secret})
    assert proc.returncode in (0, 1)
    report = run_cli("report", str(out), env={"QUAL_KEY": secret})
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"records.jsonl", "summary.json", "report.md",
                                       "junit.xml", "report.html", "server.json", "run.json"}
    for path in files:
        assert secret.encode() not in path.read_bytes(), path.name
    for text in (proc.stdout, proc.stderr, report.stdout, report.stderr):
        assert secret not in text
    assert os.environ.get("QUAL_KEY") is None
