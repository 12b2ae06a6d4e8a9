"""Fixtures for the load generator: a real fake server and a way to run the CLI."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.cli import REPO, run_cli, run_cli_process
from tests.support.openai_fake import FakeOpenAI, ServerThread
from tests.support.postgres import Cluster  # at collection: it reads the machine temp dir

__all__ = ["REPO", "fake_server", "run_cli", "run_cli_process"]


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


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[object]:
    """One throwaway PostgreSQL cluster for the session (tests.support.postgres)."""
    cluster = Cluster().start()
    try:
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture(params=["sqlite",
                        # a real PostgreSQL: CI runs it (`pytest -m services`)
                        pytest.param("postgresql", marks=pytest.mark.services)])
def history_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh history: a SQLite file, or a database of the session's PostgreSQL cluster."""
    if request.param == "sqlite":
        return str(tmp_path / "h.sqlite")
    cluster = request.getfixturevalue("postgres_cluster")
    return cluster.new_database(f"h_{uuid.uuid4().hex[:16]}")
