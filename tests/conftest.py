"""Root test configuration: stdlib and pytest only (GPU hosts run a subset with few packages)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _inside_the_test_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in its own temp dir: a default `results/` lands there, never in the
    checkout."""
    monkeypatch.chdir(tmp_path)
