"""How far one run travels through the code: a static walk, nothing runs.

The walk starts in `loadgen/commands/run.py::run_scenario` with its `scenario`
parameter marked, and follows the scenario (and every value made of it) through the
calls that pass it on, in source order, down to the reports: an argument that holds a
marked value marks the callee's parameter; an assignment, a `for` or a `with` whose
right side holds one marks its targets; a method called on a marked object walks that
method with `self` marked. Each call into another file is an event (the file entered)
and so is the return from it; a callee's body is walked once (its first call), later
calls still count their entry and return.

It prints the files entered, how often the path turns back up a layer (a step from a
file of one row of docs/architecture.md's layer table to a file of a row above it, a
return included), and how often it stays in `results` (once a module, now a package).
Run it on any tree:

    python benchmarks/run_path.py [--root TREE] [--events]

The layer table is always read from this tree's docs/architecture.md (an older tree's
modules take the row of their package, or of the module that now holds their name), so
two trees are measured against one drawing.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
START = ("loadgen.commands.run", "run_scenario", "scenario")
SCENARIO = ("loadgen.scenario", "Scenario")


@dataclass
class Function:
    module: str
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    owner: str | None = None  # the class, for a method


@dataclass
class Klass:
    module: str
    name: str
    node: ast.ClassDef
    methods: dict[str, Function] = field(default_factory=dict)
    attribute_types: dict[str, tuple[str, str]] = field(default_factory=dict)
    bases: list[ast.expr] = field(default_factory=list)


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, Klass] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted target


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def load(root: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted((root / "loadgen").rglob("*.py")):
        name = module_name(root, path)
        tree = ast.parse(path.read_text(), str(path))
        mod = Module(name, path, tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        mod.imports[alias.asname] = alias.name
                    else:
                        mod.imports[alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                   name if is_package else name.rpartition(".")[0])
                for alias in node.names:
                    mod.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                mod.functions[node.name] = Function(name, node.name, node)
            elif isinstance(node, ast.ClassDef):
                klass = Klass(name, node.name, node, bases=list(node.bases))
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        klass.methods[item.name] = Function(
                            name, f"{node.name}.{item.name}", item, owner=node.name)
                mod.classes[node.name] = klass
        modules[name] = mod
    for mod in modules.values():
        for klass in mod.classes.values():
            klass.attribute_types = attribute_types(modules, mod, klass)
    return modules


def annotation_class(modules: dict[str, Module], mod: Module,
                     node: ast.expr | None) -> tuple[str, str] | None:
    """The loadgen class an annotation or a constructor call names, if one does."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.BinOp):  # X | None
        return annotation_class(modules, mod, node.left) or annotation_class(
            modules, mod, node.right)
    if isinstance(node, ast.Subscript):  # Optional[X], list[X]
        return annotation_class(modules, mod, node.slice)
    if isinstance(node, ast.Call):
        return annotation_class(modules, mod, node.func)
    found = resolve(modules, mod, node)
    if found and isinstance(found, Klass):
        return (found.module, found.name)
    return None


def annotated_classes(modules: dict[str, Module], mod: Module,
                      node: ast.expr) -> list[tuple[str, str]]:
    """Every loadgen class an annotation names (`tuple[Scenario, X | None]`: both)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return []
    found: list[tuple[str, str]] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name | ast.Attribute):
            klass = resolve(modules, mod, sub)
            if isinstance(klass, Klass):
                found.append((klass.module, klass.name))
    return found


def attribute_types(modules: dict[str, Module], mod: Module,
                    klass: Klass) -> dict[str, tuple[str, str]]:
    types: dict[str, tuple[str, str]] = {}
    for item in klass.node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            found = annotation_class(modules, mod, item.annotation)
            if found:
                types[item.target.id] = found
    for method in klass.methods.values():
        params = {a.arg: annotation_class(modules, mod, a.annotation)
                  for a in method.node.args.args + method.node.args.kwonlyargs}
        for node in ast.walk(method.node):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id == "self"):
                        found = None
                        if isinstance(node, ast.AnnAssign):
                            found = annotation_class(modules, mod, node.annotation)
                        if found is None and isinstance(node.value, ast.Call):
                            found = annotation_class(modules, mod, node.value.func)
                        if found is None and isinstance(node.value, ast.Name):
                            found = params.get(node.value.id)
                        if found:
                            types.setdefault(target.attr, found)
    return types


def lookup(modules: dict[str, Module], dotted: str) -> Function | Klass | Module | None:
    if dotted in modules:
        return modules[dotted]
    base, _, attr = dotted.rpartition(".")
    if base in modules:
        mod = modules[base]
        if attr in mod.functions:
            return mod.functions[attr]
        if attr in mod.classes:
            return mod.classes[attr]
        if attr in mod.imports and mod.imports[attr] != dotted:  # re-exported by a face
            return lookup(modules, mod.imports[attr])
    return None


def resolve(modules: dict[str, Module], mod: Module,
            node: ast.expr) -> Function | Klass | Module | None:
    if isinstance(node, ast.Name):
        if node.id in mod.functions:
            return mod.functions[node.id]
        if node.id in mod.classes:
            return mod.classes[node.id]
        if node.id in mod.imports:
            return lookup(modules, mod.imports[node.id])
        return None
    if isinstance(node, ast.Attribute):
        base = resolve(modules, mod, node.value)
        if isinstance(base, Module):
            return lookup(modules, f"{base.name}.{node.attr}")
        if isinstance(base, Klass):
            return method_of(modules, base, node.attr)
    return None


def method_of(modules: dict[str, Module], klass: Klass, name: str) -> Function | None:
    if name in klass.methods:
        return klass.methods[name]
    mod = modules[klass.module]
    for base in klass.bases:
        found = resolve(modules, mod, base)
        if isinstance(found, Klass):
            method = method_of(modules, found, name)
            if method:
                return method
    return None


def names_in(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id


def in_order(node: ast.AST) -> list[ast.AST]:
    """Every node under `node` (not into nested functions or classes) in source order."""
    found: list[ast.AST] = []

    def visit(n: ast.AST) -> None:
        for child in ast.iter_child_nodes(n):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                          | ast.Lambda):
                continue
            found.append(child)
            visit(child)

    visit(node)
    return sorted(found, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a name or an attribute chain (through `*` and `**`), else None."""
    if isinstance(node, ast.Starred):
        return dotted(node.value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


@dataclass
class Walk:
    """`derived`: a value computed from a marked one is marked too (records, facts,
    reports: everything the run makes). Otherwise only the scenario itself travels: a
    name or attribute chain that reaches it, and an object that keeps it in an
    attribute (a Runner keeps `self.scenario`)."""

    modules: dict[str, Module]
    root: Path
    derived: bool = False
    events: list[str] = field(default_factory=list)
    walked: set[str] = field(default_factory=set)
    carriers: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def file_of(self, fn: Function | Klass) -> str:
        return str(self.modules[fn.module].path.relative_to(self.root))

    def holds(self, node: ast.expr | None, marked: set[str]) -> bool:
        if node is None:
            return False
        if self.derived:
            return bool(marked & set(names_in(node)))
        if isinstance(node, ast.Tuple | ast.List):
            return any(self.holds(e, marked) for e in node.elts)
        text = dotted(node)
        if text is None:
            return False
        parts = text.split(".")
        return any(".".join(parts[:n]) in marked for n in range(1, len(parts) + 1))

    def mark(self, target: ast.expr, marked: set[str], fn: Function) -> None:
        if self.derived:
            marked.update(names_in(target))
            return
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self.mark(element, marked, fn)
            return
        text = dotted(target)
        if text is None:
            return
        marked.add(text)
        if fn.owner and text.startswith("self.") and text.count(".") == 1:
            self.carriers.setdefault((fn.module, fn.owner), set()).add(text[5:])

    def function(self, fn: Function, marked: set[str]) -> None:
        key = f"{fn.module}.{fn.qualname}"
        if key in self.walked:
            return
        self.walked.add(key)
        mod = self.modules[fn.module]
        marked = set(marked)
        types: dict[str, tuple[str, str]] = {}
        args = fn.node.args
        for arg in args.posonlyargs + args.args + args.kwonlyargs:
            found = annotation_class(self.modules, mod, arg.annotation)
            if found:
                types[arg.arg] = found
        if fn.owner:
            types["self"] = (fn.module, fn.owner)
            if "self" in marked and not self.derived:
                marked.discard("self")
                marked.update(f"self.{a}" for a in self.carriers.get((fn.module, fn.owner), ()))
        for node in in_order(fn.node):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if self.holds(node.value, marked) or (
                        isinstance(node.value, ast.Call) and not self.derived
                        and self.call_keeps(mod, node.value, marked, types)):
                    for target in targets:
                        self.mark(target, marked, fn)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    found = annotation_class(self.modules, mod, node.value.func)
                    if found:
                        for target in node.targets:
                            if isinstance(target, ast.Name):
                                types[target.id] = found
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                if self.holds(node.iter, marked):
                    self.mark(node.target, marked, fn)
            elif isinstance(node, ast.withitem):
                if node.optional_vars is not None and (
                        self.holds(node.context_expr, marked)
                        or (isinstance(node.context_expr, ast.Call) and not self.derived
                            and self.call_keeps(mod, node.context_expr, marked, types))):
                    self.mark(node.optional_vars, marked, fn)
            elif isinstance(node, ast.NamedExpr):
                if self.holds(node.value, marked):
                    marked.add(node.target.id)
            elif isinstance(node, ast.Call):
                self.call(fn, mod, node, marked, types)

    def passes(self, node: ast.Call, marked: set[str]) -> bool:
        return any(self.holds(a, marked) for a in node.args) or any(
            self.holds(k.value, marked) for k in node.keywords)

    def callee(self, mod: Module, node: ast.Call,
               types: dict[str, tuple[str, str]]) -> Function | Klass | Module | None:
        if isinstance(node.func, ast.Attribute):
            owner = self.receiver_class(mod, node.func.value, types)
            if owner is not None:
                found = method_of(self.modules, owner, node.func.attr)
                if found is not None:
                    return found
        return resolve(self.modules, mod, node.func)

    def call_keeps(self, mod: Module, node: ast.Call, marked: set[str],
                   types: dict[str, tuple[str, str]]) -> bool:
        """What a call gives back carries the scenario when it is an object built from
        it, or when the callee says it returns the scenario or an object that keeps it
        (a RunReport keeps its scenario, an outcome its report)."""
        target = self.callee(mod, node, types)
        if isinstance(target, Klass):
            return self.passes(node, marked)
        if not isinstance(target, Function):
            return False
        if not (self.passes(node, marked) or self.holds(getattr(node.func, "value", None),
                                                          marked)):
            return False
        returns = target.node.returns
        if returns is None:
            return False
        owner = self.modules[target.module]
        return any(self.keeps_scenario(found, set()) for found in
                   annotated_classes(self.modules, owner, returns))

    def keeps_scenario(self, klass: tuple[str, str], seen: set[tuple[str, str]]) -> bool:
        if klass == SCENARIO:
            return True
        if klass in seen or klass[0] not in self.modules:
            return False
        seen.add(klass)
        found = self.modules[klass[0]].classes.get(klass[1])
        return found is not None and any(
            self.keeps_scenario(t, seen) for t in found.attribute_types.values())

    def hand_over_places(self, fn: Function, node: ast.Call, caller_marked: set[str]) -> None:
        """A directory handed over with the scenario holds it from then on: the run
        writes it there (run.json) and the reports read it back from there."""
        if not self.passes(node, caller_marked):
            return
        params = fn.node.args.posonlyargs + fn.node.args.args
        if fn.owner:
            params = params[1:]
        by_name = {a.arg: a for a in params + fn.node.args.kwonlyargs}
        pairs = list(zip(params, node.args, strict=False)) + [
            (by_name[k.arg], k.value) for k in node.keywords if k.arg in by_name]
        for param, arg in pairs:
            if (param.annotation is not None and "Path" in ast.unparse(param.annotation)
                    and isinstance(arg, ast.Name)):
                caller_marked.add(arg.id)

    def receiver_class(self, mod: Module, node: ast.expr,
                       types: dict[str, tuple[str, str]]) -> Klass | None:
        if isinstance(node, ast.Name) and node.id in types:
            module, name = types[node.id]
            return self.modules[module].classes.get(name)
        if isinstance(node, ast.Attribute):
            owner = self.receiver_class(mod, node.value, types)
            if owner and node.attr in owner.attribute_types:
                module, name = owner.attribute_types[node.attr]
                return self.modules[module].classes.get(name)
        return None

    def call(self, caller: Function, mod: Module, node: ast.Call, marked: set[str],
             types: dict[str, tuple[str, str]]) -> None:
        target: Function | Klass | Module | None = None
        receiver_marked = False
        if isinstance(node.func, ast.Attribute):
            owner = self.receiver_class(mod, node.func.value, types)
            if owner is not None:
                target = method_of(self.modules, owner, node.func.attr)
                receiver_marked = self.holds(node.func.value, marked) or (
                    not self.derived and bool(self.carriers.get((owner.module, owner.name))))
                if self.derived and "self" in marked:
                    receiver_marked = True
        if target is None:
            target = resolve(self.modules, mod, node.func)
        if not (self.passes(node, marked) or receiver_marked) or target is None or isinstance(
                target, Module):
            return
        fn = method_of(self.modules, target, "__init__") if isinstance(target, Klass) else target
        here = self.file_of(caller)
        self.events.append(self.file_of(target))
        if fn is not None:
            params = [a.arg for a in fn.node.args.posonlyargs + fn.node.args.args]
            if fn.owner:
                params = params[1:]
            callee_marked: set[str] = set()
            for index, arg in enumerate(node.args):
                if index < len(params) and self.holds(arg, marked):
                    callee_marked.add(params[index])
            for keyword in node.keywords:
                if keyword.arg and self.holds(keyword.value, marked):
                    callee_marked.add(keyword.arg)
            if fn.owner and (receiver_marked or isinstance(target, Klass)):
                callee_marked.add("self")
            if not self.derived:
                self.hand_over_places(fn, node, marked)
            self.function(fn, callee_marked)
        self.events.append(here)


def layer_rows(doc: Path) -> dict[str, int]:
    """Module or package -> its row in the loadgen layer table (0 is the top)."""
    text = doc.read_text()
    table = re.search(r"<!-- layers: loadgen -->(.*?)<!-- /layers -->", text, re.S)
    if table is None:
        raise SystemExit("run_path: docs/architecture.md has no loadgen layer table")
    rows: dict[str, int] = {}
    for index, line in enumerate(table.group(1).strip().splitlines()[2:]):
        cells = line.split("|")
        for name in re.findall(r"`([\w_]+)/?`", cells[2]):
            rows[name] = index
    return rows


def row_of(rows: dict[str, int], path: str) -> int:
    parts = Path(path).with_suffix("").parts[1:]  # below loadgen/
    head = parts[0] if parts else "loadgen"
    if head == "__init__":
        head = "loadgen"
    if head in rows:
        return rows[head]
    raise SystemExit(f"run_path: {path} has no row in the layer table")


def _in_results(path: str) -> bool:
    """The results directory's code: a module once, a package (`loadgen/results/`) now."""
    return path == "loadgen/results.py" or path.startswith("loadgen/results/")


def measure(root: Path, derived: bool = False) -> tuple[list[str], int, int, int]:
    modules = load(root)
    module, name, param = START
    walk = Walk(modules, root, derived)
    start = modules[module].functions[name]
    walk.events.append(walk.file_of(start))
    walk.function(start, {param})
    rows = layer_rows(HERE / "docs" / "architecture.md")
    files = {e for e in walk.events}
    climbs = sum(1 for a, b in zip(walk.events, walk.events[1:], strict=False)
                 if row_of(rows, b) < row_of(rows, a))
    results_stays = sum(1 for i, e in enumerate(walk.events)
                        if _in_results(e) and (i == 0 or not _in_results(walk.events[i - 1])))
    return walk.events, len(files), climbs, results_stays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE, help="the tree to walk")
    parser.add_argument("--events", action="store_true", help="print every event")
    parser.add_argument("--derived", action="store_true",
                        help="follow every value made of the scenario, not only the scenario")
    options = parser.parse_args()
    events, files, climbs, results_stays = measure(options.root.resolve(), options.derived)
    if options.events:
        for event in events:
            print(event)
    print(f"events {len(events)}  files entered {files}  turns back up {climbs}  "
          f"results.py stays {results_stays}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
