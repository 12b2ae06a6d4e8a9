"""Fixtures for the load generator: a real fake server and a way to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.openai_fake import FakeOpenAI, ServerThread

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_server() -> Iterator[Callable[..., tuple[FakeOpenAI, ServerThread]]]:
    started: list[ServerThread] = []

    def start(plan: tuple[str, ...] | list[str] = ("ok",), **kwargs: object
              ) -> tuple[FakeOpenAI, ServerThread]:
        fake = FakeOpenAI(plan, **kwargs)  # type: ignore[arg-type]
        thread = ServerThread(fake.app).start()
        started.append(thread)
        return fake, thread

    yield start
    for thread in started:
        thread.stop()


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`dsv4-qual ARGS` in a subprocess: real exit codes, real signals, real stdout."""
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    return subprocess.run([sys.executable, "-m", "loadgen", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=cwd or REPO)


def write_scenario(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
