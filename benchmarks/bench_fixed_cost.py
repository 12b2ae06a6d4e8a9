"""What a short gate run costs outside its requests: start-up, readiness, reports.

A 64-request run spends most of its CPU before the first request (imports, the
judge's word lists and language tables) and after the last (judging the run,
writing summary.json, report.md, junit.xml and report.html). This times the whole
`dsv4-qual run` process (its rusage, interpreter start included) against the project's
stub, and subtracts the CPU its phases took by its own account (summary.json's
`client.cpu_s`): the rest is the fixed cost. The stub and the client are pinned to a
core each; medians of several rounds.

    python benchmarks/bench_fixed_cost.py [--requests 64] [--repeats 5] [--before DIR]

`--before DIR`: another checkout (e.g. `git worktree add DIR COMMIT`) run in turn with
this one, round by round, on the same stub: the two medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from loadgen.bench.client import BENCH_SCENARIO, start_stub  # noqa: E402


def _pinned(core: int) -> Callable[[], None]:
    def pin() -> None:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {core})
    return pin


def one_run(url: str, requests: int, concurrency: int, tokens: int, core: int,
            tree: Path = REPO, shipped: str | None = None) -> dict[str, float]:
    """One whole run; `shipped`: a scenario of the checkout (its workload, reference phase
    and gate), cut to `requests` measured at `concurrency`, no priming."""
    with tempfile.TemporaryDirectory(prefix="dsv4-qual-fixed-") as tmp:
        scenario = Path(tmp) / "gate.toml"
        scenario.write_text(BENCH_SCENARIO.format(concurrency=concurrency,
                                                  requests=requests, tokens=tokens))
        cut: list[str] = []
        if shipped:
            scenario = tree / shipped
            cut = ["--measurement", str(requests), "--priming", "0", "--concurrency",
                   str(concurrency), "--accept-weaker-load"]
        out = Path(tmp) / "out"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "loadgen", "run", str(scenario), "--base-url", url,
             "--out", str(out), "--quiet", *cut],
            capture_output=True, text=True, preexec_fn=_pinned(core), timeout=600,
            cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)})
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"run failed ({proc.returncode}): {proc.stderr[-2000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        summary = json.loads((out / "summary.json").read_text())
        in_phases = float(summary["client"]["cpu_s"] or 0.0)
        return {"wall_s": wall, "cpu_s": cpu, "in_phases_s": in_phases,
                "fixed_s": cpu - in_phases}


def interpreter_start(core: int) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "pass"], check=True, preexec_fn=_pinned(core))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _table(name: str, rounds: list[dict[str, float]]) -> None:
    for key in ("wall_s", "cpu_s", "in_phases_s", "fixed_s"):
        values = [r[key] for r in rounds]
        print(f"{name:7s} {key:12s} median {statistics.median(values):6.2f}  "
              f"(min {min(values):.2f}, max {max(values):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--stub-core", type=int, default=0)
    ap.add_argument("--client-core", type=int, default=1)
    ap.add_argument("--before", type=Path, default=None)
    ap.add_argument("--scenario", default=None,
                    help="a shipped scenario (path in the checkout) instead of the bench's")
    args = ap.parse_args()
    trees = {"this": REPO, **({"before": args.before.resolve()} if args.before else {})}
    stub, url = start_stub(args.tokens, 0.0, [args.stub_core], "tool")
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    try:
        for _ in range(args.repeats):
            for name, tree in trees.items():
                rounds[name].append(one_run(url, args.requests, args.concurrency,
                                            args.tokens, args.client_core, tree,
                                            args.scenario))
    finally:
        stub.terminate()
        stub.wait()
    bare = statistics.median(interpreter_start(args.client_core) for _ in range(3))
    print(f"{args.requests} requests at {args.concurrency} in flight, {args.tokens}-token "
          f"replies, every report, {args.scenario or 'the bench scenario'}; "
          f"{args.repeats} rounds, in turn")
    for name, done in rounds.items():
        _table(name, done)
    if args.before:
        ratios = [a["fixed_s"] / b["fixed_s"] for a, b in zip(rounds["this"],
                                                             rounds["before"], strict=True)]
        print("fixed_s this/before: " + ", ".join(f"{r:.2f}" for r in ratios)
              + f"  (median {statistics.median(ratios):.2f})")
    print(f"interpreter start alone: {bare:.2f} CPU-s")


if __name__ == "__main__":
    main()
