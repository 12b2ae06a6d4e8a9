"""The failure rate by request order on a cold packed sim: what the mechanism alone gives.

#52448's server (vLLM 0.27.x, 64 in flight, 1024 identical tool turns) failed none of
its first 256 requests, then a rising share, up to 67% in the last bucket (298 of 1024
overall). This runs the same shape on a cold sim with the packed layout and prints the
failure rate per bucket of request order. Nothing is fitted to #52448: each request's
fate is the engine's, from what its rows read (`server_patch/sim/reads.py`), at the
sim's default `fatal_foreign_share` unless `--thresholds` asks for others.

The sim's scale: max_model_len 4096 (C128A capacity 256 at the sim's ratio 16), 128
max_num_seqs (the DSpark recipe's), and max_tokens 1024 instead of 16384, which the
sim's context cannot hold: a stuck `issue-52448` turn grows its sequence from about 800
to about 1800 tokens, its active width from 64 to 128 = capacity/2, as #52448's grew
from 128 to 256 = capacity/2.5. Workloads: `issue-52448` (identical turns: the reporter's) and
`sim-smoke` (contexts of different lengths: every batch mixes widths).

    python benchmarks/bench_sim_profile.py [--requests 1024] [--concurrency 64]
        [--bucket 128] [--thresholds 0.5] [--graph-mode full_and_piecewise]
"""

from __future__ import annotations

import argparse
import time

from sim_closed_loop import buckets, run_scenario_loop, scenario_requests

from loadgen.scenario import load_scenario
from server_patch.sim.config import GRAPH_MODES, SimConfig

ISSUE_52448 = "#52448 (vLLM 0.27.x, 64 in flight, 1024 requests): 0% of the first 256, " \
    "rising to 67% in the last bucket; 298/1024 (29.1%) overall"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=1024)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--bucket", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--thresholds", default=str(SimConfig.fatal_foreign_share),
                    help="fatal_foreign_share values, comma-separated")
    ap.add_argument("--graph-mode", choices=GRAPH_MODES, default=SimConfig.graph_mode)
    ap.add_argument("--workloads", default="issue-52448,sim-smoke")
    args = ap.parse_args()

    print(ISSUE_52448)
    print(f"sim: packed, {args.graph_mode}, cold, concurrency {args.concurrency}, "
          f"{args.requests} requests, max_tokens {args.max_tokens}, max_model_len "
          f"{args.max_model_len}; failure rate per {args.bucket} requests in order\n")
    for workload in args.workloads.split(","):
        scenario = load_scenario(workload)
        for threshold in (float(t) for t in args.thresholds.split(",")):
            cfg = SimConfig(layout="packed", graph_mode=args.graph_mode, max_num_seqs=128,
                            max_model_len=args.max_model_len, fatal_foreign_share=threshold)
            started = time.perf_counter()
            run = run_scenario_loop(cfg, scenario_requests(scenario),
                                  concurrency=args.concurrency, count=args.requests,
                                  max_tokens=args.max_tokens)
            lost = run.lost
            cells = " ".join(f"{failed / n * 100:4.0f}%" for _, n, failed in
                             buckets(lost, args.bucket))
            first = lost[:256]
            print(f"{workload:<12} share>{threshold:<4} {cells}   overall "
                  f"{sum(lost)}/{len(lost)} ({sum(lost) / len(lost) * 100:.1f}%), first 256: "
                  f"{sum(first)}/{len(first)}  [{time.perf_counter() - started:.0f} s]")
            st = run.engine.stats
            print(f"{'':<12} rows read wrong: {st.foreign_rows} found foreign KV, "
                  f"{st.missing_rows} missing context; {st.misread_prefill_rows} prefill")


if __name__ == "__main__":
    main()
