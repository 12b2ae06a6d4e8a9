"""Every test tier the project declares runs in CI, and the README's command leaves
out what is not fast.

A marker pyproject declares is a tier: the README's test command (pytest's addopts)
deselects it, and `.ci/run` must select it, or its tests would run nowhere. `gpu` is
the one exception: it needs a CUDA device (benchmarks/run_on_gpu.py runs it there).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ON_A_GPU_ONLY = {"gpu"}


def _markers() -> set[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"]
    return {line.split(":", 1)[0].strip() for line in config["markers"]}


def _addopts_deselected() -> set[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"]
    return set(re.findall(r"not (\w+)", config["addopts"]))


def _ci_selected() -> set[str]:
    text = (REPO / ".ci" / "run").read_text()
    selected: set[str] = set()
    for expr in re.findall(r"python -m pytest -m '([^']+)'|python -m pytest -m (\w+)", text):
        selected |= set(re.findall(r"\w+", " ".join(expr))) - {"or", "and", "not"}
    return selected


def test_every_tier_is_left_out_of_the_readme_command() -> None:
    assert _markers() <= _addopts_deselected(), _markers() - _addopts_deselected()


def test_every_tier_runs_in_ci() -> None:
    missing = _markers() - ON_A_GPU_ONLY - _ci_selected()
    assert not missing, f"declared but never run by .ci/run: {sorted(missing)}"


def test_the_long_and_services_tier_requires_its_services() -> None:
    """PostgreSQL and Prometheus must fail there when missing, never skip."""
    text = (REPO / ".ci" / "run").read_text()
    tier = text.index("python -m pytest -m 'long or services'")
    assert text.index("export DSV4_QUAL_REQUIRE_POSTGRES=1") < tier
    assert text.index("export DSV4_QUAL_REQUIRE_PROMETHEUS=1") < tier
