"""Run the GPU tier and the GPU benchmarks from a source checkout, in one command.

On a GPU host with torch and triton (the image a GPU host usually has), from the
repository root:

    python3 benchmarks/run_on_gpu.py [--wheels DIR] [--upstream-cache DIR] [--out DIR]

Steps, each logged to ``<out>/<step>.log`` (benchmarks also write ``<step>.json``):

- ``tests``: ``pytest -m gpu`` over the test files that carry the ``gpu`` marker (CUDA
  graph capture and replay of the builder's consumer, the sim on a real graph);
- ``bench_c128a``: our three layouts against each other (``bench_c128a.py``);
- ``bench_c128a_upstream``: ours beside upstream vLLM's own builder
  (``bench_c128a_upstream.py``; needs the blob-pinned upstream files: ``--upstream-cache``);
- ``bench_guard``: the stride guard's cost on the GPU (``bench_guard.py --device cuda``).

Nothing is installed into the host's environment: what the steps need and the host
lacks (pytest, packaging; and what those import) is installed from the wheels in
``--wheels`` into ``<out>/site`` (``pip install --no-index --no-deps --target``), which
the steps get on ``PYTHONPATH`` with the checkout. Stdlib only. Exit code: 0 when every
step passed, 1 when one failed, 2 when the host cannot run them (no CUDA, no torch or
triton), 3 when a needed package is missing and no wheel for it was given.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Modules the steps import that a GPU image may lack (torch and triton it must have).
NEEDED_MODULES: tuple[str, ...] = ("pytest", "packaging")
STEPS: tuple[str, ...] = ("tests", "bench_c128a", "bench_c128a_upstream", "bench_guard")
#: ``--quick``: a smoke of each benchmark (one capacity, three batch sizes).
QUICK_ARGS = ("--capacities", "8192", "--requests", "1,32,256")
_GPU_MARK = re.compile(r"pytest\.mark\.gpu\b")


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path,
                        help="folder of wheels for what the host lacks (installed --no-deps)")
    parser.add_argument("--upstream-cache", type=Path,
                        help="cache root holding upstream/vllm-<release>/ for "
                             "bench_c128a_upstream (default: its own default)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "results" / time.strftime("gpu-%Y%m%d-%H%M%S"))
    parser.add_argument("--only", action="append", choices=STEPS,
                        help="run only this step (repeatable)")
    parser.add_argument("--quick", action="store_true",
                        help="benchmarks on fewer shapes (a smoke, not the README figures)")
    return parser.parse_args(argv)


def missing_modules(names: Iterable[str], path: Sequence[str] = ()) -> list[str]:
    """Top-level modules that fail to import (a name or anything it imports), in a
    fresh interpreter with ``path`` first on ``sys.path``."""
    code = (
        "import importlib, sys\n"
        f"sys.path[:0] = {list(path)!r}\n"
        "missing = set()\n"
        f"for name in {list(names)!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as err:\n"
        "        missing.add((err.name or name).split('.')[0])\n"
        "print(' '.join(sorted(missing)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def wheel_for(module: str, wheels: Path) -> Path | None:
    """The wheel in ``wheels`` whose distribution is named like ``module`` (- _ . alike)."""
    for wheel in sorted(wheels.glob("*.whl")):
        if _normalized(wheel.name.split("-")[0]) == _normalized(module):
            return wheel
    return None


def install_missing(names: Iterable[str], wheels: Path | None, site: Path) -> list[str]:
    """Install, from ``wheels`` into ``site``, what importing ``names`` lacks, until nothing
    is missing; returns what is still missing (no wheel for it)."""
    names = list(names)
    for _ in range(20):  # one round per layer of missing dependencies
        missing = missing_modules(names, [str(site)])
        if not missing:
            return []
        found = {m: wheel_for(m, wheels) if wheels else None for m in missing}
        if not all(found.values()):
            return sorted(m for m, w in found.items() if w is None)
        site.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--no-compile", "--target", str(site), *map(str, found.values())],
                       check=True)
    return missing_modules(names, [str(site)])


def gpu_test_files(root: Path = ROOT) -> list[str]:
    """Test files that carry the ``gpu`` marker, relative to ``root``."""
    return sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
                  if _GPU_MARK.search(p.read_text(encoding="utf-8")))


def step_commands(out: Path, upstream_cache: Path | None, quick: bool) -> dict[str, list[str]]:
    """Each step's command line (run from the repository root)."""
    py = sys.executable
    bench_extra = list(QUICK_ARGS) if quick else []
    upstream = ["--upstream-cache", str(upstream_cache)] if upstream_cache else []
    return {
        # addopts cleared: the GPU host has pytest, not the fast tier's parallel runner
        "tests": [py, "-m", "pytest", "-o", "addopts=", "-m", "gpu", "-p", "no:cacheprovider",
                  "-s",
                  *gpu_test_files()],
        "bench_c128a": [py, "benchmarks/bench_c128a.py", *bench_extra,
                        "--json", str(out / "bench_c128a.json")],
        "bench_c128a_upstream": [py, "benchmarks/bench_c128a_upstream.py", *bench_extra,
                                 *upstream, "--json", str(out / "bench_c128a_upstream.json")],
        "bench_guard": [py, "benchmarks/bench_guard.py", "--device", "cuda",
                        "--json", str(out / "bench_guard.json")],
    }


def _host_problem() -> str | None:
    for name in ("torch", "triton"):
        try:
            importlib.import_module(name)
        except ImportError:
            return f"{name} is not importable by {sys.executable}"
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    return None


def _run_step(name: str, command: list[str], env: dict[str, str], out: Path) -> int:
    print(f"\n=== {name}: {' '.join(command)}", flush=True)
    with open(out / f"{name}.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        return proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    problem = _host_problem()
    if problem:
        print(f"run_on_gpu: {problem}; this runs on a GPU host", file=sys.stderr)
        return 2
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    site = out / "site"
    lacking = install_missing(NEEDED_MODULES, args.wheels, site)
    if lacking:
        print(f"run_on_gpu: missing {', '.join(lacking)}; give --wheels a folder holding a "
              f"wheel for each", file=sys.stderr)
        return 3
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *([str(site)] if site.is_dir() else []),
         *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    commands = step_commands(out, args.upstream_cache, args.quick)
    results = {}
    for name in args.only or STEPS:
        start = time.monotonic()
        rc = _run_step(name, commands[name], env, out)
        results[name] = (rc, time.monotonic() - start)
    print(f"\nrun_on_gpu: logs in {out}")
    for name, (rc, seconds) in results.items():
        print(f"  {name:22} {'passed' if rc == 0 else f'FAILED (exit {rc})':16} {seconds:6.1f} s")
    return 0 if all(rc == 0 for rc, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
