"""Root test configuration: stdlib and pytest only (GPU hosts run a subset with few packages)."""

from __future__ import annotations

import os
import struct
import tempfile
import zlib
from pathlib import Path

import pytest

try:  # hypothesis is a dev dependency (GPU hosts may lack it)
    from hypothesis import configuration as _hypothesis
except ImportError:  # pragma: no cover - a host without the dev extra
    pass
else:
    # Its example database and failure patches go to a temp dir, never the checkout.
    _hypothesis.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="dsv4q-hypothesis-"))


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


#: Where the tests of the pictures themselves live: every figure there is drawn.
_DRAWING_TESTS = Path(__file__).parent / "loadgen" / "report"


def _one_pixel_png() -> bytes:
    """A valid PNG of one white pixel: what a reader of a page's images can decode."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\xff\xff")) + chunk(b"IEND", b""))


_PIXEL = _one_pixel_png()


@pytest.fixture(autouse=True)
def _figures_built_not_drawn(request: pytest.FixtureRequest,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Drawing a report's figures (matplotlib's tick and text layout, rasterising,
    encoding) was a quarter of the fast tier's CPU, spent by tests that never look at a
    picture. Outside the tests of the pictures (tests/loadgen/report/, or a test that asks
    for `drawn_figures`), each figure is still built exactly as a report builds it, and one fixed
    valid PNG stands in for its pixels (`figures.encode_png`). Runs in processes of their
    own (the slow, vLLM and docker tiers) draw every figure. GPU tests draw none and never
    import the reports, whose packages a GPU host may lack."""
    if "drawn_figures" in request.fixturenames or _DRAWING_TESTS in request.node.path.parents \
            or request.node.get_closest_marker("gpu"):
        return
    try:
        from loadgen.report import figures
    except ImportError:  # pragma: no cover - a host without the reports' packages
        return
    monkeypatch.setattr(figures, "encode_png", lambda fig, dpi, **savefig: _PIXEL)


@pytest.fixture
def drawn_figures() -> None:
    """Asked for by a test that reads a report's pictures: its figures are drawn."""


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
