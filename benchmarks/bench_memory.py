"""RSS of the load generator over a long run: records go to disk, not to memory.

Sends 20,000 requests (64 streamed tokens each) to the fast local stub and samples the
client process's resident memory every second. A flat line is the point: a soak of a
million requests must not need more memory than a smoke run.

    python benchmarks/bench_memory.py [--requests 20000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen.bench.client import BENCH_SCENARIO, start_stub


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--stub-core", type=int, default=0)
    ap.add_argument("--client-core", type=int, default=1)
    args = ap.parse_args()
    stub, url = start_stub(args.tokens, 0.0, [args.stub_core])
    try:
        with tempfile.TemporaryDirectory(prefix="dsv4-qual-mem-") as tmp:
            sc = Path(tmp) / "mem.toml"
            sc.write_text(BENCH_SCENARIO.format(concurrency=args.concurrency,
                                                requests=args.requests, tokens=args.tokens))
            out = Path(tmp) / "out"
            client = subprocess.Popen(
                [sys.executable, "-m", "loadgen", "run", str(sc), "--base-url", url, "--out",
                 str(out), "--quiet"],
                preexec_fn=lambda: os.sched_setaffinity(0, {args.client_core}),
                stdout=subprocess.DEVNULL)
            t0 = time.monotonic()
            samples: list[tuple[float, float, int]] = []
            while client.poll() is None:
                time.sleep(1.0)
                rss = rss_mb(client.pid)
                done = count_lines(out / "records.jsonl")
                if rss is not None:
                    samples.append((time.monotonic() - t0, rss, done))
            print(f"{'t (s)':>7} {'records':>8} {'RSS (MB)':>9}")
            for t, rss, done in samples:
                print(f"{t:>7.1f} {done:>8} {rss:>9.1f}")
            during = [s for s in samples if 0 < s[2] < args.requests]
            if during:
                first, last = during[0], during[-1]
                peak = max(s[1] for s in during)
                print(f"\nwhile sending: RSS {first[1]:.1f} MB at {first[2]} records, "
                      f"{last[1]:.1f} MB at {last[2]} records, peak {peak:.1f} MB; "
                      f"growth {last[1] - first[1]:+.1f} MB over {last[2] - first[2]} records")
            print(f"client exit code {client.returncode}")
    finally:
        stub.terminate()
        stub.wait(timeout=10)


if __name__ == "__main__":
    main()
