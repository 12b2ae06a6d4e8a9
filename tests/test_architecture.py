"""The layout's rules: loadgen and server_patch never import each other, the load
generator never imports torch (the sim is driven over HTTP, like vLLM), neither package
has an import cycle, and every import points down the layers docs/architecture.md draws
(the drawing is read from the doc, so the two cannot drift apart); inside the judge, down
the layers its package face draws (text helpers, the rules of one reply, the run-level
rules, the gate)."""

from __future__ import annotations

import ast
import importlib.util
import re
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
                base = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                   name if is_package else name.rpartition(".")[0])
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


ARCHITECTURE_DOC = REPO / "docs" / "architecture.md"
#: Where each package's layers are drawn: the two packages in docs/architecture.md, the
#: judge's own (text helpers, rules, gate) in its package face.
DRAWINGS = {"loadgen": ARCHITECTURE_DOC, "server_patch": ARCHITECTURE_DOC,
            "loadgen.judge": REPO / "loadgen" / "judge" / "__init__.py"}


def drawn_layers(package: str, doc: str | None = None) -> list[set[str]]:
    """The layers drawn for `package` (where DRAWINGS says), top to bottom: each a set of
    units (a sub-package's or a module's name, the package itself by its own name)."""
    text = DRAWINGS[package].read_text() if doc is None else doc
    marker = rf"<!-- layers: {re.escape(package)} -->\n(.*?)<!-- /layers -->"
    drawings = re.findall(marker, text, re.S)
    # One drawing, read whole: a second copy could drift from the one the test reads.
    where = DRAWINGS[package].relative_to(REPO) if package in DRAWINGS else "the doc"
    assert len(drawings) == 1, \
        f"{where} draws the layers of {package} {len(drawings)} times, not once"
    match = re.search(marker, text, re.S)
    assert match is not None
    layers = []
    for row in match.group(1).splitlines()[2:]:  # past the header and its rule
        cells = row.strip().strip("|").split("|")
        named = re.sub(r"\([^)]*\)", "", cells[1])  # words in parentheses explain
        layers.append({name.rstrip("/") for name in re.findall(r"`([\w/]+)`", named)})
    return layers


def unit(module: str, package: str = "loadgen", nested: frozenset[str] = frozenset()) -> str:
    """`loadgen.judge.gate` -> `judge`; `loadgen.cli` -> `cli`; `loadgen` -> `loadgen`;
    within `loadgen.judge`: `loadgen.judge.text.scripts` -> `text`, `loadgen.judge` ->
    `judge`. A sub-package the drawing names as a unit of its own (`nested`:
    `judge/reply`) is one: `loadgen.judge.reply.loops` -> `judge/reply`."""
    depth = package.count(".") + 1
    parts = module.split(".")
    for name in sorted(nested, key=len, reverse=True):
        path = name.split("/")
        if parts[depth:depth + len(path)] == path:
            return name
    return parts[depth] if len(parts) > depth else parts[-1]


def nested_units(layers: list[set[str]]) -> frozenset[str]:
    """The sub-packages a drawing names as units of their own (`judge/reply`)."""
    return frozenset(name for layer in layers for name in layer if "/" in name)


def imports_against_layers(edges: dict[str, set[str]], layers: list[set[str]],
                           package: str = "loadgen") -> list[str]:
    """Every import that points up the layers or sideways into another unit of the same
    layer, and every unit no layer names, as a line a person can act on."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    nested = nested_units(layers)
    problems = sorted(f"{unit(m, package, nested)} has no layer (module {m})"
                      for m in edges if unit(m, package, nested) not in rank)
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            a, b = unit(source, package, nested), unit(target, package, nested)
            if a == b or a not in rank or b not in rank:
                continue
            if rank[b] <= rank[a]:
                problems.append(f"{source} imports {target}: {b} is not below {a}")
    return problems


def test_the_layer_check_refuses_an_import_up_or_sideways() -> None:
    layers = [{"cli"}, {"commands", "bench"}, {"judge"}]
    fine = {"loadgen.cli": {"loadgen.commands.run"}, "loadgen.commands.run": {
        "loadgen.judge.gate", "loadgen.commands.report"}, "loadgen.judge.gate": set()}
    assert imports_against_layers(fine, layers) == []
    up = {**fine, "loadgen.judge.gate": {"loadgen.commands.report"}}
    assert imports_against_layers(up, layers) == [
        "loadgen.judge.gate imports loadgen.commands.report: commands is not below judge"]
    sideways = {**fine, "loadgen.bench.client": {"loadgen.commands.run"}}
    assert imports_against_layers(sideways, layers) == [
        "loadgen.bench.client imports loadgen.commands.run: commands is not below bench"]
    unnamed = {**fine, "loadgen.newfolder.x": set()}
    assert imports_against_layers(unnamed, layers) == [
        "newfolder has no layer (module loadgen.newfolder.x)"]


def test_the_judge_is_checked_by_its_own_units() -> None:
    assert unit("loadgen.judge.text.scripts", "loadgen.judge") == "text"
    assert unit("loadgen.judge.reply.garbled.words", "loadgen.judge") == "reply"
    assert unit("loadgen.judge.verdicts", "loadgen.judge") == "verdicts"
    assert unit("loadgen.judge", "loadgen.judge") == "judge"
    layers = [{"gate"}, {"reply"}, {"text"}]
    rule_in_text = {"loadgen.judge.text.prose": {"loadgen.judge.reply.loops"},
                    "loadgen.judge.reply.loops": {"loadgen.judge.text.prose"}}
    assert imports_against_layers(rule_in_text, layers, "loadgen.judge") == [
        "loadgen.judge.text.prose imports loadgen.judge.reply.loops: reply is not below text"]


def test_a_sub_package_drawn_as_a_unit_of_its_own_is_checked_as_one() -> None:
    layers = [{"judge"}, {"scenario"}, {"judge/reply"}]
    assert unit("loadgen.judge.reply.loops", nested=nested_units(layers)) == "judge/reply"
    assert unit("loadgen.judge.gate.gate", nested=nested_units(layers)) == "judge"
    fine = {"loadgen.judge.gate.gate": {"loadgen.scenario", "loadgen.judge.reply.loops"},
            "loadgen.scenario": {"loadgen.judge.reply"}, "loadgen.judge.reply": set(),
            "loadgen.judge.reply.loops": set()}
    assert imports_against_layers(fine, layers) == []
    up = {**fine, "loadgen.judge.reply.loops": {"loadgen.judge.gate.gate"}}
    assert imports_against_layers(up, layers) == [
        "loadgen.judge.reply.loops imports loadgen.judge.gate.gate: judge is not below "
        "judge/reply"]


def test_the_drawing_is_read_from_the_doc() -> None:
    doc = ("<!-- layers: pkg -->\n| layer | pkg |\n|---|---|\n| top | `cli` |\n"
           "| low | `judge/` (`rules`), `records` |\n<!-- /layers -->\n")
    assert drawn_layers("pkg", doc) == [{"cli"}, {"judge", "records"}]


@pytest.mark.parametrize("package", sorted(DRAWINGS))
def test_imports_follow_the_layers_drawn(package: str) -> None:
    layers = drawn_layers(package)
    # The modules of the package and the imports between them (a sub-package: only those
    # inside it, the rest of its parent is the parent's drawing's business).
    edges = module_imports(package.replace(".", "/"))
    assert len(edges) > 10  # the walk found the package's modules
    assert imports_against_layers(edges, layers, package) == []
    named = set().union(*layers)
    assert named == {unit(m, package, nested_units(layers)) for m in edges}, \
        "a layer names a unit the code does not have"


@pytest.mark.parametrize("package", ["loadgen", "server_patch"])
def test_package_faces_follow_one_convention(package: str) -> None:
    """Every package opens with a docstring that says what it is for; `__all__` is a
    package's face, so it appears only in an `__init__.py` (history, report, workload,
    c128a offer one), never in a module; an `__init__.py` that lists one names only
    what it defines or imports."""
    for path in sorted((REPO / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(REPO)
        if path.name == "__init__.py":
            assert ast.get_docstring(tree), f"{rel}: a package without a docstring"
        exported = [node for node in tree.body if isinstance(node, ast.Assign)
                    and any(getattr(t, "id", None) == "__all__" for t in node.targets)]
        if path.name != "__init__.py":
            assert not exported, f"{rel}: __all__ in a module (only a package face has one)"
        for node in exported:
            defined = {n.name for n in tree.body if isinstance(
                n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)}
            defined |= {a.asname or a.name for n in tree.body
                        if isinstance(n, ast.ImportFrom | ast.Import) for a in n.names}
            defined |= {getattr(t, "id", None) for n in tree.body if isinstance(n, ast.Assign)
                        for t in n.targets}
            names = {elt.value for elt in node.value.elts}  # type: ignore[attr-defined]
            assert names <= defined, f"{rel}: __all__ names {sorted(names - defined)}"
