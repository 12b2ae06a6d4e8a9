"""How often each shipped scenario's gate catches a server that fails some requests.

Every run's report states `gate.detectable_rate_95`: the smallest failure rate its size
catches (more than `allowed` failures) with 95% probability, if requests fail
independently. This measures catch rates by repeated runs, two ways:

1. **independent failures** at exactly 0.3%, 1% and 3%: each repeated gate run draws
   its measured requests' outcomes (a seeded binomial draw, here in the benchmark;
   the sim never draws). This checks the report's statement: the measured catch rate
   should be 95% or more exactly where the rate is at or above `detectable_rate_95`.
2. **the sim's own failures**: a cold packed sim, driven as a closed loop at 64 in
   flight with `sim-smoke`'s mixed-length turns (`sim_closed_loop.py`), each repeat
   with another workload seed. The mechanism sets the rate: the C128A capacity
   (max_model_len) against the contexts served; the larger it is, the fewer rows of
   a step land inside the packed region. Capacities 4096, 2048 and 1024 (max_model_len
   65536, 32768, 16384) give rates near 0.7%, 2% and 5% (printed: what they gave).
   Each repeat is one cold run of the longest gate's priming + measured requests; each
   scenario's gate reads its own window of it (its priming, then its measured
   requests), as if it had run first on that server. A lost request counts as a gated
   failure. The binomial prediction at the measured rate is printed beside it: where
   the sim's failures are not independent, the two differ.

The scenarios' own concurrency and workload are not the sim arm's (one failure
process, every gate's size): that is the point, the rate belongs to the server, the
size to the gate. `positive-control` is a control (it must reproduce), not a gate
that catches; it is left out.

    python benchmarks/bench_gate_power.py [--draws 4000] [--sim-repeats 8]
        [--capacities 65536,32768,16384] [--scenarios release-gate,smoke]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sim_closed_loop import run_scenario_loop, scenario_requests

from loadgen.bounds import detectable_rate
from loadgen.scenario import load_scenario
from server_patch.sim.config import SimConfig

RATES = (0.003, 0.01, 0.03)
SHIPPED = Path(__file__).resolve().parents[1] / "scenarios"


@dataclass(frozen=True)
class Gate:
    scenario: str
    priming: int
    measured: int
    allowed: int

    @property
    def detectable(self) -> float:
        return detectable_rate(self.measured, self.allowed) or 1.0

    def predicted_catch(self, rate: float) -> float:
        """P(more than `allowed` of `measured` fail) when each fails with `rate`."""
        from scipy.stats import binom

        return float(binom.sf(self.allowed, self.measured, rate))


def shipped_gates(names: list[str] | None = None) -> list[Gate]:
    """The candidate gates of the shipped scenarios (or of those named)."""
    gates = []
    for path in sorted(SHIPPED.glob("*.toml")):
        sc = load_scenario(path)
        if sc.gate.role != "candidate" or (names and sc.name not in names):
            continue
        measured = max(sc.load.measurement, sc.gate.required_measured())
        gates.append(Gate(sc.name, sc.load.priming, measured, sc.gate.allowed))
    return gates


def independent_arm(gates: list[Gate], draws: int) -> None:
    rng = np.random.default_rng(0)
    print(f"1. independent failures: {draws} gate runs per cell; measured catch rate "
          "(binomial prediction)")
    header = "".join(f"{f'{r * 100:g}%':>18}" for r in RATES)
    print(f"{'scenario':<13}{'measured':>9}{'allowed':>8}{'detectable_95':>14}{header}")
    for g in gates:
        cells = []
        for rate in RATES:
            failures = rng.binomial(g.measured, rate, size=draws)
            caught = float((failures > g.allowed).mean())
            mark = "*" if rate >= g.detectable else " "
            cells.append(f"{caught * 100:6.1f}% ({g.predicted_catch(rate) * 100:5.1f}%){mark}")
        print(f"{g.scenario:<13}{g.measured:>9}{g.allowed:>8}{g.detectable * 100:>13.2f}%"
              f"{''.join(f'{c:>18}' for c in cells)}")
    print("  * the rate is at or above the gate's detectable_rate_95: the report promises "
          ">= 95% there\n")


def sim_arm(gates: list[Gate], repeats: int, capacities: list[int]) -> None:
    length = max(g.priming + g.measured for g in gates)
    print(f"2. the sim's own failures: {repeats} cold runs of {length} requests per "
          "capacity (packed, 64 in flight, sim-smoke turns, a new workload seed each run)")
    base = load_scenario("sim-smoke")
    for max_model_len in capacities:
        cfg = SimConfig(layout="packed", max_num_seqs=128, max_model_len=max_model_len,
                        max_num_batched_tokens=max(max_model_len, 16384))
        started = time.perf_counter()
        runs = []
        for seed in range(repeats):
            workload = base.workload.model_copy(update={"seed": seed})
            scenario = base.model_copy(update={"workload": workload})
            run = run_scenario_loop(cfg, scenario_requests(scenario), concurrency=64,
                                  count=length, max_tokens=base.request.max_tokens or 160)
            runs.append(run.lost)
        rate = sum(map(sum, runs)) / sum(map(len, runs))
        per_run = ", ".join(f"{sum(r) / len(r) * 100:.1f}" for r in runs)
        print(f"\ncapacity {cfg.capacity} (max_model_len {max_model_len}): the sim failed "
              f"{rate * 100:.2f}% of requests (per run: {per_run} %) "
              f"[{time.perf_counter() - started:.0f} s]")
        print(f"{'scenario':<13}{'window':>12}{'detectable_95':>14}{'caught':>10}"
              f"{'binomial at this rate':>23}")
        for g in gates:
            windows = [r[g.priming:g.priming + g.measured] for r in runs]
            caught = sum(sum(w) > g.allowed for w in windows)
            print(f"{g.scenario:<13}{f'{g.priming}+{g.measured}':>12}"
                  f"{g.detectable * 100:>13.2f}%{f'{caught}/{repeats}':>10}"
                  f"{g.predicted_catch(rate) * 100:>22.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--sim-repeats", type=int, default=8)
    ap.add_argument("--capacities", default="65536,32768,16384",
                    help="the sim's max_model_len per row, comma-separated ('' skips the sim)")
    ap.add_argument("--scenarios", default="", help="only these shipped scenarios")
    args = ap.parse_args()
    gates = shipped_gates([n for n in args.scenarios.split(",") if n])
    independent_arm(gates, args.draws)
    if args.capacities:
        sim_arm(gates, args.sim_repeats, [int(c) for c in args.capacities.split(",")])


if __name__ == "__main__":
    main()
