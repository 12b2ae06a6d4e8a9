"""The walk behind docs/architecture.md's "path of one run" figures
(benchmarks/run_path.py): what it follows, what it counts, on a tree small enough to
count by hand."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run_path() -> object:
    spec = importlib.util.spec_from_file_location("run_path", REPO / "benchmarks" / "run_path.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_path"] = module
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "loadgen" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text))
    return root


TREE = {
    "__init__.py": "",
    "commands/__init__.py": "",
    "engine/__init__.py": "",
    "commands/run.py": """
        from loadgen.engine.runner import Runner, unrelated
        from loadgen.results import write_run

        def run_scenario(scenario, out):
            unrelated(out)                 # not given the scenario: not followed
            runner = Runner(scenario)      # an object that keeps it
            runner.run()
            write_run(scenario)
    """,
    "engine/runner.py": """
        from loadgen.results import write_run

        def unrelated(out):
            write_run(out)

        class Runner:
            def __init__(self, scenario):
                self.scenario = scenario

            def run(self):
                write_run(self.scenario)
    """,
    "results.py": """
        def write_run(value):
            return value
    """,
}


def test_the_walk_follows_the_scenario_and_counts_each_turn_back_up(tmp_path: Path) -> None:
    run_path = _run_path()
    events, files, climbs, results_stays = run_path.measure(_tree(tmp_path, TREE))  # type: ignore[attr-defined]
    assert events == [
        "loadgen/commands/run.py",
        "loadgen/engine/runner.py", "loadgen/commands/run.py",   # Runner(scenario)
        "loadgen/engine/runner.py",                              # runner.run()
        "loadgen/results.py", "loadgen/engine/runner.py",        # write_run(self.scenario)
        "loadgen/commands/run.py",
        "loadgen/results.py", "loadgen/commands/run.py",         # write_run(scenario)
    ]
    # engine -> commands twice, results -> engine once, results -> commands once.
    assert (files, climbs, results_stays) == (3, 4, 2)


def test_a_module_the_drawing_does_not_place_is_an_error(tmp_path: Path) -> None:
    run_path = _run_path()
    tree = dict(TREE)
    tree["nowhere.py"] = "def go(value):\n    return value\n"
    tree["commands/run.py"] = ("from loadgen.nowhere import go\n\n"
                               "def run_scenario(scenario):\n    go(scenario)\n")
    with pytest.raises(SystemExit, match=r"nowhere\.py has no row in the layer table"):
        run_path.measure(_tree(tmp_path, tree))  # type: ignore[attr-defined]


def test_the_script_prints_its_figures_for_this_tree() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "run_path.py")],
                          capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("events ") and "files entered" in proc.stdout
