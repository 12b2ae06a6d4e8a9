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


def module_imports(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, anywhere in its body
    (a lazy import inside a function still ties the two modules together)."""
    root = REPO / package
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                bases = [alias.name for alias in node.names]
                found = [b for b in bases if b in modules]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                found = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                         for a in node.names]
                found = [f for f in found if f in modules]
            else:
                continue
            targets.update(f for f in found if f != name)
        edges[name] = targets
    return edges


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", ["loadgen", "server_patch"])
def test_no_import_cycles(package: str) -> None:
    edges = module_imports(package)
    assert len(edges) > 10  # the walk found the package's modules
    assert import_cycles(edges) == []
