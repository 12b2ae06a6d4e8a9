"""Root test configuration: stdlib and pytest only (GPU hosts run a subset with few packages)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

try:  # hypothesis is a dev dependency (GPU hosts may lack it)
    from hypothesis import configuration as _hypothesis
except ImportError:  # pragma: no cover - a host without the dev extra
    pass
else:
    # Its example database and failure patches go to a temp dir, never the checkout.
    _hypothesis.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="dsv4q-hypothesis-"))


#: Tiers that start interpreters of other environments (vLLM's venv): theirs read the
#: compiled packages pip put beside their sources, which a cache prefix would hide.
_FOREIGN_INTERPRETER_TIERS = ("vllm",)


def _selects(config: pytest.Config, tier: str) -> bool:
    """Whether the session's `-m` selects tests of `tier` (pytest's own reading of the
    expression; where it cannot be read, as if it did)."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:  # pragma: no cover - a pytest that moved it
        return True
    markexpr = config.getoption("markexpr", "") or ""
    return not markexpr or Expression.compile(markexpr).evaluate(lambda name: name == tier)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Compiled modules (the project's, and the tests' rewritten for assertions) are kept
    in the project's cache, never beside the sources, in this process and in every
    process a test starts (workers included: they start after this). A machine that
    writes no bytecode (PYTHONDONTWRITEBYTECODE, as images often set) otherwise compiles
    every module again in each worker and each child process: a quarter of the fast
    tier's CPU. A prefix the caller set is kept; a session that starts vLLM's own
    interpreter is left as it is."""
    if any(_selects(config, tier) for tier in _FOREIGN_INTERPRETER_TIERS):
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(
        Path(os.environ.get("DSV4_QUAL_CACHE") or Path.home() / ".cache" / "dsv4-qual")
        / "pycache")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: a worker a core and one more (at most `--maxprocesses`). A quarter of
    a worker's time is spent waiting (a server to start or stop, a timeout the test is
    about, a child process), in which the extra worker runs; on a machine another job
    keeps busy, it is also a larger share of the cores. PYTEST_XDIST_AUTO_NUM_WORKERS,
    where set, decides as xdist lets it."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    return cores + 1


#: Tiers whose tools want short socket paths under the machine's own temp dir.
_OWN_TEMP_TIERS = ("docker", "vllm", "slurm")


@pytest.fixture(autouse=True)
def _inside_the_test_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in its own temp dir: a default `results/` lands there, never in the
    checkout."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def temp_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             monkeypatch: pytest.MonkeyPatch) -> Path | None:
    """The temp dir of this test alone (tempfile's and TMPDIR, for its subprocesses too).

    It keeps what a test leaves out of the machine's temp dir; it hides nothing: the
    product removes the temp folders it makes, and the tests that say so look here
    (`temp_dir` is empty after a run). None in the tiers that start tools of their own.
    """
    if any(request.node.get_closest_marker(tier) for tier in _OWN_TEMP_TIERS):
        return None
    path = tmp_path_factory.mktemp("temp")
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    monkeypatch.setenv("TMPDIR", str(path))
    return path


#: Fixtures that start a real service (a PostgreSQL cluster): a test that takes one is in
#: the `services` tier, which CI runs and the README's test command leaves out.
_SERVICE_FIXTURES = frozenset({"postgres_cluster", "own_cluster"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark before `-m` selects (tryfirst): the tier follows from what the test starts."""
    for item in items:
        if _SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)
