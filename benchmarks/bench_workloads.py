"""The load generator's cost per request on each workload, side by side in one run.

The new workloads send larger bodies (a session's whole history over a shared prefix of
thousands of tokens, needles in long filler) and their replies are judged by known
answers beside the detectors of failure shapes; this says what a request costs the
client on each, beside the workloads that were there before.

The project's stub (`loadgen.bench.stub`, burst mode, pinned to one core) answers every
request at once: a tool call for the tool-turn and long-context workloads (their healthy
reply), an answer in prose for known-answer and session requests (so the judge's checks of
answers in prose run; the stub's fixed answer is wrong for every one of them, which makes
the judge look for conflicting values too). The client (`python -m loadgen.bench.client
--child`, this checkout, verdicts and records on) runs pinned to another core, each
workload in turn, round after round (`--repeats`), so a drifting machine affects them
alike. Per run: the client's CPU during its phases (its own accounting, start-up and
reports excluded) per request, the whole process's CPU, and the requests/s.

    python benchmarks/bench_workloads.py [--requests 1000] [--repeats 5] [--tokens 64]
        [--concurrency 32] [--stub-core 0] [--client-core 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from loadgen.bench.client import BENCH_HEAD, run_client_once, start_stub  # noqa: E402

#: (name, reply shape, the [workload] tables)
WORKLOADS: tuple[tuple[str, str, str], ...] = (
    ("tool-turn", "tool", '[workload]\nkind = "tool-turn"\nvariant = "per-request"\n'
                          "accounts = 64\n"),
    ("long-context", "tool", '[workload]\nkind = "long-context"\n'
                             "context_tokens = [512, 2048, 8192]\n"),
    ("known-answer", "answer", '[workload]\nkind = "known-answer"\n'),
    ("session", "answer", '[workload]\nkind = "session"\nsessions = 32\n'
                          "think_time_s = [0.0, 0.0]\nshared_prefix_tokens = [1024, 4096]\n"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64, help="streamed tokens per reply")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--stub-core", type=int, default=0)
    ap.add_argument("--client-core", type=int, default=1)
    args = ap.parse_args()
    stubs = {shape: start_stub(args.tokens, 0.0, [args.stub_core], shape)
             for shape in ("tool", "answer")}
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in WORKLOADS}
    try:
        for _ in range(args.repeats):
            for name, shape, table in WORKLOADS:
                # The template's braces are its figures; a TOML table has none.
                runs[name].append(run_client_once(
                    stubs[shape][1], args.concurrency, args.requests, args.tokens, "auto", 1,
                    [args.client_core], scenario=BENCH_HEAD + table))
    finally:
        for proc, _ in stubs.values():
            proc.terminate()
            proc.wait(timeout=10)
    base = statistics.median(r["cpu_s"] / r["requests"] for r in runs["tool-turn"])
    print(f"{args.requests} requests a run, {args.concurrency} in flight, {args.tokens}-token "
          f"replies, {args.repeats} rounds; medians (min-max)")
    print(f"{'workload':<14} {'CPU ms/req':>18} {'x tool-turn':>11} {'req/s':>7} "
          f"{'process CPU s':>14}")
    for name, _, _ in WORKLOADS:
        per = [1000 * r["cpu_s"] / r["requests"] for r in runs[name]]
        rps = statistics.median(r["requests"] / r["wall_s"] for r in runs[name])
        whole = statistics.median(r["process_cpu_s"] for r in runs[name])
        print(f"{name:<14} {statistics.median(per):>8.3f} ({min(per):.3f}-{max(per):.3f})"
              f" {statistics.median(per) / (1000 * base):>11.2f} {rps:>7.0f} {whole:>14.2f}")


if __name__ == "__main__":
    main()
