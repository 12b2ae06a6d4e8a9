"""Fresh soaks back to back: how many rounds came out invalid, and why.

A nightly job that calls a healthy server's run invalid on some nights gets switched
off, so this runs what a nightly job runs, many times: N fresh `dsv4-qual soak sim-smoke
--rounds 2`, each in a new process and a new temp directory (its own embedded sim, its
own receipts, its own history), one after the other. With `--busy`, one CPU hog per core
runs the whole time: a machine shared with other jobs, where timing races show.

Per soak it prints each round's exit code and what the gate read: the builder calls in
the counted patch receipts beside the calls the sim's /metrics counted at the run's end
(`receipt/server`; a receipt behind the server is one the gate read before the counts
reached it), and, for an invalid round, the gate's reason. Then a summary: invalid
rounds out of all, grouped by reason. Exit 0 when no round was invalid, else 1.

    python benchmarks/bench_soak_rounds.py [--soaks 20] [--busy] [--scenario sim-smoke]
        [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INVALID = 2
BUILDER_CALLS = "dsv4_qual_c128a_builder_calls_total"


@dataclass
class Round:
    number: int
    exit_code: int | None
    receipt_calls: int | None  # the counted receipts' guard calls, as the gate read them
    server_calls: int | None  # the sim's own count on /metrics at the run's end
    reasons: list[str] = field(default_factory=list)

    def line(self) -> str:
        seen = f"{self.receipt_calls}/{self.server_calls}"
        text = f"round {self.number}: exit {self.exit_code}, builder calls receipt/server {seen}"
        return text + (f": {'; '.join(self.reasons)}" if self.reasons else "")


@dataclass
class SoakResult:
    exit_code: int
    seconds: float
    rounds: list[Round]
    error: str | None = None


def _server_calls(server: dict) -> int | None:
    for info in (server.get("servers") or {}).values():
        for line in (info.get("metrics_after") or "").splitlines():
            if line.startswith(BUILDER_CALLS + " "):
                return int(float(line.split()[1]))
    return None


def read_round(directory: Path) -> Round:
    """What one round's results directory says: exit code, receipts read, gate reasons."""
    number = int(directory.name.rsplit("-", 1)[1])
    try:
        summary = json.loads((directory / "summary.json").read_text())
        server = json.loads((directory / "server.json").read_text())
    except (OSError, ValueError) as exc:
        return Round(number, None, None, None, [f"unreadable results: {exc}"])
    gate = summary.get("gate") or {}
    counted = [r for r in server.get("receipts") or [] if r.get("counted")]
    calls = sum(int((r.get("guard") or {}).get("calls") or 0) for r in counted)
    code = gate.get("exit_code")
    reasons = [str(r) for r in gate.get("reasons") or []] if code == INVALID else []
    return Round(number, code, calls if counted else None, _server_calls(server), reasons)


def run_soak(scenario: str, rounds: int, timeout_s: float) -> SoakResult:
    """One fresh soak in a new process and a new directory (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="dsv4-qual-soak-bench-") as tmp:
        out = Path(tmp) / "out"
        # The sim's default receipts directory is a temp dir: keep it inside this one.
        env = {**os.environ, "TMPDIR": tmp, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(p for p in (str(REPO),
                                                        os.environ.get("PYTHONPATH")) if p)}
        started = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "loadgen", "soak", scenario, "--rounds", str(rounds),
                 "--out", str(out), "--quiet"],
                capture_output=True, text=True, env=env, cwd=tmp, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return SoakResult(-1, time.monotonic() - started, [], f"timed out after "
                              f"{timeout_s:.0f} s")
        seconds = time.monotonic() - started
        found = sorted(out.glob("*/round-*"))
        error = None if found else (proc.stderr.strip().splitlines() or ["no rounds"])[-1]
        return SoakResult(proc.returncode, seconds, [read_round(d) for d in found], error)


def _spin() -> None:
    while True:
        pass


def start_hogs(count: int) -> list[multiprocessing.Process]:
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for hog in hogs:
        hog.start()
    return hogs


def stop_hogs(hogs: list[multiprocessing.Process]) -> None:
    for hog in hogs:
        hog.terminate()
    for hog in hogs:
        hog.join(timeout=5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--soaks", type=int, default=20, help="fresh soaks to run (default 20)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per soak (default 2)")
    ap.add_argument("--scenario", default="sim-smoke")
    ap.add_argument("--busy", action="store_true",
                    help="run one CPU hog per core the whole time")
    ap.add_argument("--timeout", type=float, default=600.0, help="per soak, seconds")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    hogs = start_hogs(cores) if args.busy else []
    print(f"{args.soaks} fresh soaks of `{args.scenario} --rounds {args.rounds}` on {cores} "
          f"core(s){f', {len(hogs)} CPU hog(s) running' if hogs else ''}", flush=True)
    results: list[SoakResult] = []
    try:
        for n in range(1, args.soaks + 1):
            result = run_soak(args.scenario, args.rounds, args.timeout)
            results.append(result)
            print(f"soak {n:>2}: exit {result.exit_code} in {result.seconds:.1f} s"
                  + (f" ({result.error})" if result.error else ""), flush=True)
            for r in result.rounds:
                print(f"    {r.line()}", flush=True)
    finally:
        stop_hogs(hogs)
    rounds = [r for s in results for r in s.rounds]
    invalid = [r for r in rounds if r.exit_code == INVALID]
    broken = [s for s in results if s.error]
    reasons = Counter(reason for r in invalid for reason in r.reasons or ["(no reason)"])
    print(f"\n{len(invalid)} invalid round(s) of {len(rounds)} in {len(results)} soak(s); "
          f"soak exit codes {dict(sorted(Counter(s.exit_code for s in results).items()))}")
    for reason, count in reasons.most_common():
        print(f"  {count} x {reason}")
    behind = [r for r in rounds if None not in (r.receipt_calls, r.server_calls)
              and r.receipt_calls < r.server_calls]  # type: ignore[operator]
    print(f"{len(behind)} round(s) whose receipts counted fewer builder calls than the "
          "server had made")
    if broken:
        print(f"{len(broken)} soak(s) left no round: " + "; ".join(str(s.error)
                                                                for s in broken[:3]))
    return 0 if not invalid and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
