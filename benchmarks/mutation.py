"""Mutation testing of the judge and the builder's layouts, one module at a time.

    python benchmarks/mutation.py loadgen/judge/gate/gate.py [MODULE...] [--max-children N]

For each module, the tree (tracked files and untracked ones git does not ignore) is
copied into a fresh directory (`--workdir`, default a temp dir; `.mutation/` in the
checkout is ignored by git for it), and mutmut mutates that module only there
(`mutants/` of the copy: the checkout's source is never touched) and runs, for each
mutant, the tests of `TESTS` below that reach the mutated function (mutmut records which
tests call which function in one plain run first). It prints per module: mutants,
killed, survived, timeouts, other (no test reached the function, or mutmut could not
judge it), the score (killed / (killed + survived)), the run's time, and each survivor as
file:line and the mutated line. Survivors judged equivalent (no behaviour a user can see
changes) are listed with why in `benchmarks/mutation_equivalent.md`; the score after
them leaves them out.

Exit 0 when every module ran; 1 when mutmut failed to run one. It takes minutes (not in
the fast tier): `.ci/run` does not run it; docs/testing.md quotes its last scores.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The unit tests of the `garbled` rule and of the judge on legitimate replies (every
#: detector's module and the script table they read).
GARBLED_TESTS = [
    "tests/loadgen/judge/reply/test_garbled.py",
    "tests/loadgen/judge/reply/test_garbled_edges.py",
    "tests/loadgen/judge/reply/test_garbled_fields.py",
    "tests/loadgen/judge/reply/test_garbled_fragments.py",
    "tests/loadgen/judge/reply/test_garbled_markers.py",
    "tests/loadgen/judge/reply/test_garbled_script_switches.py",
    "tests/loadgen/judge/reply/test_garbled_statistics.py",
    "tests/loadgen/judge/reply/test_garbled_statistics_edges.py",
    "tests/loadgen/judge/reply/test_garbled_thresholds.py",
    "tests/loadgen/judge/reply/test_verdicts.py",
    "tests/loadgen/judge/reply/test_no_false_alarms.py",
    "tests/loadgen/judge/reply/test_request_scripts.py",
]

#: module -> the test files that exercise it (each mutant runs those of them that reach
#: the function it changes).
TESTS: dict[str, list[str]] = {
    "loadgen/judge/gate/gate.py": [
        "tests/loadgen/judge/gate/test_bounds_and_gate.py",
        "tests/loadgen/judge/gate/test_gate_checks.py",
        "tests/loadgen/judge/gate/test_gate_mutants.py",
        "tests/loadgen/judge/gate/test_gate_self_consistency.py",
    ],
    "loadgen/judge/gate/receipt_rules.py": [
        "tests/loadgen/judge/gate/test_receipt_rules.py",
        "tests/loadgen/judge/gate/test_receipt_rules_words.py",
        "tests/loadgen/judge/gate/test_receipt_rules_lists.py",
        "tests/loadgen/judge/gate/test_bounds_and_gate.py",
        "tests/loadgen/judge/gate/test_gate_mutants.py",
    ],
    "loadgen/judge/verdicts.py": [
        "tests/loadgen/judge/reply/test_verdicts.py",
        "tests/loadgen/judge/reply/test_loops.py",
        "tests/loadgen/judge/reply/test_leaks.py",
        "tests/loadgen/judge/reply/test_invisible_content.py",
        "tests/loadgen/judge/reply/test_garbled.py",
        "tests/loadgen/judge/reply/test_substance.py",
    ],
    "loadgen/judge/reply/loops.py": [
        "tests/loadgen/judge/reply/test_loops.py",
        "tests/loadgen/judge/reply/test_loop_thresholds.py",
        "tests/loadgen/judge/reply/test_verdicts.py",
        "tests/loadgen/judge/reply/test_invisible_content.py",
        "tests/loadgen/judge/reply/test_tool_call_assembly.py",
        "tests/loadgen/judge/reply/test_no_false_alarms.py",
        "tests/loadgen/judge/reply/test_honest_shapes.py",
    ],
    "loadgen/judge/reply/leaks.py": [
        "tests/loadgen/judge/reply/test_leaks.py",
        "tests/loadgen/judge/reply/test_leak_findings.py",
        "tests/loadgen/judge/reply/test_verdicts.py",
        "tests/loadgen/judge/reply/test_invisible_content.py",
        "tests/loadgen/judge/reply/test_no_false_alarms.py",
        "tests/loadgen/judge/reply/test_honest_shapes.py",
    ],
    "loadgen/judge/text/visible.py": [
        "tests/loadgen/judge/reply/test_invisible_content.py",
        "tests/loadgen/judge/reply/test_verdicts.py",
        "tests/loadgen/judge/reply/test_loops.py",
        "tests/loadgen/judge/reply/test_leaks.py",
    ],
    "loadgen/judge/gate/checks.py": [
        "tests/loadgen/judge/gate/test_gate_checks.py",
        "tests/loadgen/judge/gate/test_bounds_and_gate.py",
    ],
    "loadgen/judge/reply/tool_calls.py": [
        "tests/loadgen/judge/reply/test_tool_call_findings.py",
        "tests/loadgen/judge/reply/test_tool_call_assembly.py",
        "tests/loadgen/judge/reply/test_loops.py",
        "tests/loadgen/judge/reply/test_verdicts.py",
        "tests/loadgen/judge/reply/test_no_false_alarms.py",
        "tests/loadgen/judge/reply/test_honest_shapes.py",
    ],
    "loadgen/judge/run_level/__init__.py": [
        "tests/loadgen/judge/run_level/test_run_level_edges.py",
        "tests/loadgen/judge/run_level/test_cross_talk.py",
        "tests/loadgen/judge/run_level/test_reference_rule.py",
    ],
    "loadgen/judge/run_level/cross_talk.py": [
        "tests/loadgen/judge/run_level/test_cross_talk.py",
        "tests/loadgen/judge/run_level/test_cross_talk_edges.py",
    ],
    "loadgen/judge/run_level/reference.py": [
        "tests/loadgen/judge/run_level/test_reference_rule.py",
        "tests/loadgen/judge/run_level/test_reference_edges.py",
    ],
    "loadgen/judge/run_level/divergent.py": [
        "tests/loadgen/judge/reply/test_verdicts.py",
        "tests/loadgen/judge/run_level/test_run_level_edges.py",
    ],
    "loadgen/judge/gate/aggregate.py": [
        "tests/loadgen/judge/gate/test_aggregate_counts.py",
        "tests/loadgen/judge/run_level/test_run_level_edges.py",
        "tests/loadgen/judge/gate/test_bounds_and_gate.py",
        "tests/loadgen/judge/gate/test_gate_checks.py",
        "tests/loadgen/judge/gate/test_gate_mutants.py",
    ],
    "loadgen/judge/gate/spread.py": [
        "tests/loadgen/judge/gate/test_spread_edges.py",
        "tests/loadgen/judge/gate/test_bounds_and_gate.py",
        "tests/loadgen/judge/gate/test_gate_mutants.py",
    ],
    "loadgen/judge/gate/qualification.py": [
        "tests/loadgen/judge/gate/test_qualification_verdicts.py",
    ],
    "loadgen/judge/gate/run_report.py": [
        "tests/loadgen/judge/gate/test_run_report_judging.py",
        "tests/loadgen/judge/gate/test_aggregate_counts.py",
        "tests/loadgen/judge/run_level/test_run_level_edges.py",
        "tests/loadgen/judge/run_level/test_reference_edges.py",
    ],
    "loadgen/judge/reply/garbled/__init__.py": GARBLED_TESTS,
    "loadgen/judge/reply/garbled/statistics.py": GARBLED_TESTS,
    "loadgen/judge/reply/garbled/fragments.py": GARBLED_TESTS,
    "loadgen/judge/reply/garbled/script_mix.py": GARBLED_TESTS,
    "loadgen/judge/reply/garbled/markers.py": GARBLED_TESTS,
    "loadgen/judge/reply/garbled/points.py": GARBLED_TESTS,
    "loadgen/judge/text/scripts.py": GARBLED_TESTS,
    "loadgen/judge/reply/substance.py": [
        "tests/loadgen/judge/reply/test_substance.py",
        "tests/loadgen/judge/reply/test_substance_findings.py",
        "tests/loadgen/judge/reply/test_verdicts.py",
        "tests/loadgen/judge/run_level/test_cross_talk.py",
    ],
    "server_patch/c128a/layouts.py": [
        "tests/server_patch/test_c128a_layouts.py",
        "tests/server_patch/test_c128a_layout_edges.py",
    ],
}

EQUIVALENT = Path(__file__).with_name("mutation_equivalent.md")

#: `mutmut results` statuses, by what they count as.
KILLED = {"killed"}
SURVIVED = {"survived"}
TIMEOUT = {"timeout", "suspicious"}


def tree_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                         check=True, capture_output=True).stdout.decode()
    return [p for p in out.split("\0") if p and (ROOT / p).is_file()]


def copy_tree(dest: Path) -> None:
    for rel in tree_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)


def configure(dest: Path, module: str, tests: list[str]) -> None:
    """mutmut's config, written into the copy's pyproject.toml only."""
    top = sorted({p.split("/", 1)[0] for p in tree_files()} - {"pyproject.toml"})
    toml = dest / "pyproject.toml"
    toml.write_text(toml.read_text() + "\n[tool.mutmut]\n"
                    f'source_paths = ["loadgen", "server_patch"]\n'
                    f"only_mutate = [{module!r}]\n"
                    f"also_copy = {top!r}\n"
                    f"pytest_add_cli_args_test_selection = {tests!r}\n"
                    'pytest_add_cli_args = ["-p", "no:randomly", "-p", "no:cacheprovider", '
                    '"-n", "0"]\n'
                    "use_git_change_detection = false\n")


def results(work: Path, env: dict[str, str]) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"],
                         cwd=work, env=env, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\w.]+__mutmut_\d+): (.+)$", line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def where(module: str, name: str, work: Path, env: dict[str, str]) -> str:
    """file:line and the change of a mutant, from `mutmut show`'s diff."""
    diff = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, env=env,
                          capture_output=True, text=True).stdout.splitlines()
    minus = [x[1:] for x in diff if x.startswith("-") and not x.startswith("---")]
    plus = [x[1:] for x in diff if x.startswith("+") and not x.startswith("+++")]
    func = name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1]
    func = re.sub(r"^x[ǁ_]", "", func).split("ǁ")[-1]
    source = (ROOT / module).read_text().splitlines()
    start, end = 1, len(source)
    for node in ast.walk(ast.parse("\n".join(source))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == func:
            start, end = node.lineno, node.end_lineno or node.lineno
            break
    line = start
    for n in range(start, end + 1):
        if minus and source[n - 1].strip() == minus[0].strip():
            line = n
            break
    change = " / ".join(x.strip() for x in minus) + "  ->  " + " / ".join(x.strip() for x in plus)
    return f"{module}:{line} ({func}): {change}"


def has_functions(module: str) -> bool:
    """Whether the module has code mutmut mutates (it leaves class bodies' fields, e.g. a
    dataclass's defaults, and module-level constants alone)."""
    tree = ast.parse((ROOT / module).read_text())
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) for node in ast.walk(tree))


def equivalent_names() -> set[str]:
    """Mutants listed as equivalent: `- <mutant name>: why` in mutation_equivalent.md."""
    if not EQUIVALENT.exists():
        return set()
    return set(re.findall(r"^- `?([\w.ǁ]+__mutmut_\d+)`?:", EQUIVALENT.read_text(), re.M))


def run_module(module: str, args: argparse.Namespace) -> bool:
    tests = TESTS.get(module)
    if tests is None:
        print(f"{module}: no tests mapped in TESTS ({', '.join(TESTS)})")
        return False
    tests = [t for t in tests if (ROOT / t).exists()]
    base = Path(args.workdir) if args.workdir else None
    if base:
        base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mutation-", dir=base))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MUTANT_UNDER_TEST")}
    t0 = time.monotonic()
    try:
        copy_tree(work)
        configure(work, module, tests)
        cmd = [sys.executable, "-m", "mutmut", "run"]
        if args.max_children:
            cmd += ["--max-children", str(args.max_children)]
        run = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        found = results(work, env)
        took = time.monotonic() - t0
        if not found and not has_functions(module):
            print(f"\n{module}: 0 mutants (mutmut mutates the code of functions and methods; "
                  f"this module has none); {took:.0f} s")
            return True
        if not found:
            print(f"{module}: mutmut made no result (exit {run.returncode})")
            print(run.stdout[-3000:], run.stderr[-3000:], sep="\n")
            return False
        statuses = list(found.values())
        killed = sum(s in KILLED for s in statuses)
        survivors = sorted((n for n, s in found.items() if s in SURVIVED),
                           key=lambda n: (n.rsplit("__mutmut_", 1)[0], int(n.rsplit("_", 1)[1])))
        timeouts = sum(s in TIMEOUT for s in statuses)
        other = len(statuses) - killed - len(survivors) - timeouts
        equivalent = equivalent_names() & set(survivors)
        judged = killed + len(survivors)
        score = 100 * killed / judged if judged else 0.0
        net = judged - len(equivalent)
        print(f"\n{module}: {len(statuses)} mutants, {killed} killed, {len(survivors)} "
              f"survived ({len(equivalent)} of them listed as equivalent), {timeouts} "
              f"timeouts, {other} other; score {score:.1f}% "
              f"({100 * killed / net if net else 0:.1f}% of non-equivalent); {took:.0f} s")
        if other:
            kinds: dict[str, int] = {}
            for s in statuses:
                if s not in KILLED | SURVIVED | TIMEOUT:
                    kinds[s] = kinds.get(s, 0) + 1
            print("  other:", ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        for name in survivors:
            mark = " [equivalent]" if name in equivalent else ""
            print(f"  survived{mark} {name}\n      {where(module, name, work, env)}")
        return True
    finally:
        if args.keep:
            print(f"  kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", default=list(TESTS),
                    help="source files to mutate (default: every module of TESTS)")
    ap.add_argument("--max-children", type=int, default=0,
                    help="mutants run at once (default: mutmut's, one per core)")
    ap.add_argument("--workdir", help="where the copies go (default: the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the copy (mutmut browse there)")
    args = ap.parse_args()
    ok = [run_module(m, args) for m in args.modules]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
