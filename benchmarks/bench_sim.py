"""What the embedded reference server serves on this machine, and what its mechanism
gives a cold and a warm server.

For each layout: requests/s and tokens/s over one `sim-smoke`-shaped run (the load
generator in the same process, as `dsv4-qual demo` runs it), and the failure rate.
Then, for the packed layout, a cold server (no priming) against a warm one (primed
first): how many requests finished cleanly before the first was lost, and the failure
rate of the first and second half of the measured requests. Nothing is shaped by hand:
these are what the mechanism gives.

    python benchmarks/bench_sim.py [--measurement 192] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from loadgen.commands.run import run_scenario
from loadgen.scenario import load_scenario


def _run(layout: str, concurrency: int, priming: int, measurement: int, out: Path) -> dict:
    base = load_scenario("sim-smoke")
    sc = base.model_copy(update={"target": base.target.model_copy(update={
        "sim": base.target.sim.model_copy(update={"layout": layout})})})
    sc = sc.with_overrides(concurrency=concurrency, priming=priming, measurement=measurement)
    data = sc.model_dump(mode="python")
    data["gate"]["min_measured"] = 1
    sc = type(sc).model_validate(data)
    return run_scenario(sc, out, quiet=True, echo=False, html=False).summary


def _metric(summary_dir: Path, name: str) -> float | None:
    import json

    server = json.loads((summary_dir / "server.json").read_text())
    text = next(iter(server["servers"].values())).get("metrics_after") or ""
    for line in text.splitlines():
        if line.startswith(name):
            return float(line.rsplit(" ", 1)[1])
    return None


def _halves(out: Path) -> tuple[float, float]:
    import json

    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    recs = sorted((r for r in recs if r["phase"] == "measurement"), key=lambda r: r["seq"])
    half = len(recs) // 2
    bad = [r["verdicts"][0] == "stuck_in_reasoning" for r in recs]
    return sum(bad[:half]) / max(1, half), sum(bad[half:]) / max(1, len(recs) - half)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measurement", type=int, default=192)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dsv4-qual-bench-sim-") as tmp:
        root = Path(tmp)
        print(f"{'layout':<9} {'req/s':>7} {'tok/s':>8} {'TTFT p50 ms':>11} {'stuck':>7}")
        for layout in ("packed", "capacity", "prefix"):
            out = root / layout
            s = _run(layout, args.concurrency, 0, args.measurement, out)
            m = s["phases"]["measurement"]
            ttft = m["latency_s"]["ttft"]["p50"]
            stuck = m["verdicts"].get("stuck_in_reasoning", 0)
            print(f"{layout:<9} {m['requests_per_s']:>7.1f} {m['tokens_per_s']:>8.0f} "
                  f"{ttft * 1000:>11.1f} {stuck:>4}/{m['requests']}")
        print(f"\npacked, concurrency {args.concurrency}: cold vs warm server")
        print(f"{'server':<6} {'priming':>7} {'clean before first loss':>24} "
              f"{'1st half':>9} {'2nd half':>9}")
        for label, priming in (("cold", 0), ("warm", args.measurement)):
            out = root / f"packed-{label}"
            _run("packed", args.concurrency, priming, args.measurement, out)
            first = _metric(out, 'dsv4_qual_sim_first_corruption{at="finished_before"}')
            a, b = _halves(out)
            print(f"{label:<6} {priming:>7} {first if first is not None else '-':>24} "
                  f"{a:>9.1%} {b:>9.1%}")


if __name__ == "__main__":
    main()
