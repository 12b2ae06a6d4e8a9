"""The layout's one rule: loadgen and server_patch never import each other, and the
load generator never imports torch (the sim is driven over HTTP, like vLLM)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def imported_modules(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (REPO / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(REPO))] = names
    return found


@pytest.mark.parametrize("package,forbidden", [
    ("loadgen", {"server_patch", "torch", "triton", "vllm"}),
    ("server_patch", {"loadgen", "vllm"}),
])
def test_dependencies_point_one_way(package: str, forbidden: set[str]) -> None:
    offenders = {f: sorted(names & forbidden) for f, names in imported_modules(package).items()
                 if names & forbidden}
    # server_patch may import vllm only where it patches it, inside the plugin's functions.
    if package == "server_patch":
        offenders.pop("server_patch/plugin.py", None)
        offenders.pop("server_patch/vllm_compat.py", None)
    assert offenders == {}
