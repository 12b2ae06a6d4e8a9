"""Benchmark the C128A builder: capacity vs prefix vs packed, on a GPU.

For 1..256 requests of 1 + 7 decode tokens (DSpark verify steps) with mixed
context lengths, at capacities 640 (max_model_len 70000) and 8192 (1M
context), it prints per layout the median builder time per call, the bytes
written and the write bandwidth reached against the H200's ~4.3 TB/s copy rate.

Three times per configuration:
- ``graph``: device time per call with launch overhead taken out: 20 calls
  captured in one CUDA graph, replayed and timed with CUDA events, median of
  many replays, the three layouts interleaved so clock drift hits them alike.
  The goal is judged on it: a few-microsecond kernel is otherwise measured as
  its launch latency;
- ``gpu``: device time of one call (triton.testing.do_bench, L2 flushed before
  each call, median), launch latency included;
- ``call``: wall time per call in a back-to-back loop (median of trials),
  which adds the host side (views, checks, launch) the engine step pays.

The question it answers (issue 3): is ``prefix`` within 5% of ``packed`` and
clearly faster than ``capacity`` at capacity 8192, i.e. the fix without giving
back #50004's speed-up?

Usage, from the repository root, with only torch and triton installed:
    PYTHONPATH=. python benchmarks/bench_c128a.py [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import NoReturn

from c128a_steps import (
    LAYOUTS,
    MAX_MODEL_LEN,
    TOKENS_PER_REQUEST,
    builder_call,
    decode_batch,
    log_uniform_contexts,
    parse_ints,
)
from gpu_timing import copy_rate_tb_s, graph_times_us

H200_COPY_TB_S = 4.3  # the copy rate measured on the project's H200 (TB/s)


def _fail(message: str) -> NoReturn:
    print(f"bench_c128a: {message}", file=sys.stderr)
    sys.exit(2)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacities", type=parse_ints, default=[640, 8192])
    parser.add_argument("--requests", type=parse_ints,
                        default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    parser.add_argument("--context-min", type=int, default=2_000,
                        help="shortest context in the mix (tokens)")
    parser.add_argument("--context-max", type=int, default=48_000,
                        help="longest context in the mix (tokens); sets the active width")
    parser.add_argument("--rep-ms", type=int, default=200, help="do_bench repetition time")
    parser.add_argument("--loop-calls", type=int, default=200, help="calls per wall-time trial")
    parser.add_argument("--graph-calls", type=int, default=20, help="calls per captured graph")
    parser.add_argument("--graph-replays", type=int, default=60, help="timed replays per layout")
    parser.add_argument("--json", help="also write the results as JSON to this path")
    return parser.parse_args()


def main() -> None:
    args = _args()
    try:
        import torch
    except ImportError:
        _fail("needs torch")
    if not torch.cuda.is_available():
        _fail("needs a CUDA GPU (torch.cuda.is_available() is False); this benchmark is GPU only")
    try:
        import triton
        import triton.testing
    except ImportError:
        _fail("needs triton")

    from server_patch.c128a import builder
    from server_patch.c128a import kernel as c128a_kernel

    device = torch.device("cuda")
    gen = torch.Generator().manual_seed(50004)

    def batch(num_requests: int, capacity: int) -> dict:
        """Decode tokens of requests with log-uniform context lengths in the mix."""
        high = min(args.context_max, MAX_MODEL_LEN[capacity])
        contexts = log_uniform_contexts(num_requests, args.context_min, high, gen)
        return decode_batch(contexts, capacity, gen, device)

    def warm_up_clocks(seconds: float = 1.0) -> None:
        """Clocks idle low; time nothing until the GPU has been busy for a while."""
        a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()

    warm_up_clocks()
    copy_tb_s = copy_rate_tb_s(device)
    gpu_name = torch.cuda.get_device_name()
    print(f"device: {gpu_name}; measured copy rate {copy_tb_s:.2f} TB/s (read+write); "
          f"reference {H200_COPY_TB_S} TB/s; "
          f"torch {torch.__version__}, triton {triton.__version__}")
    print(f"mix: {max(args.requests)} max requests x {TOKENS_PER_REQUEST} decode tokens, "
          f"contexts log-uniform in [{args.context_min}, {args.context_max}]; "
          f"times are medians")

    results = []
    max_tokens = max(args.requests) * TOKENS_PER_REQUEST
    for capacity in args.capacities:
        rows = max_tokens + 64
        decode_buf = torch.full((rows, capacity), -1, dtype=torch.int32, device=device)
        lens_buf = torch.zeros(rows, dtype=torch.int32, device=device)
        prefill_buf = torch.full((rows, capacity), -1, dtype=torch.int32, device=device)
        for num_requests in args.requests:
            b = batch(num_requests, capacity)
            row = dict(capacity=capacity, requests=num_requests, tokens=b["tokens"],
                       width=b["width"], max_context=b["max_context"], layouts={})
            buffers = (decode_buf, lens_buf, prefill_buf)
            graph_us = graph_times_us(
                {layout: builder_call(builder(layout, impl="triton"), b, buffers, b["width"])
                 for layout in LAYOUTS}, args.graph_calls, args.graph_replays)
            for layout in LAYOUTS:
                call = builder_call(builder(layout, impl="triton"), b, buffers, b["width"])
                call()
                torch.cuda.synchronize()
                gpu_ms = triton.testing.do_bench(call, warmup=25, rep=args.rep_ms,
                                                 return_mode="median")
                trials = []
                for _ in range(7):
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    for _ in range(args.loop_calls):
                        call()
                    torch.cuda.synchronize()
                    trials.append((time.perf_counter() - start) / args.loop_calls)
                written_cols = capacity if layout == "capacity" else b["width"]
                bytes_written = b["tokens"] * (written_cols + 1) * 4  # rows + decode lens
                row["layouts"][layout] = dict(
                    graph_us=graph_us[layout],
                    gpu_us=gpu_ms * 1e3,
                    call_us=statistics.median(trials) * 1e6,
                    bytes=bytes_written,
                    tb_s=bytes_written / (graph_us[layout] * 1e-6) / 1e12,
                )
            results.append(row)

    header = (f"{'cap':>5} {'reqs':>4} {'tok':>5} {'W':>5} | "
              + " | ".join(f"{name:^41}" for name in LAYOUTS)
              + " | prefix/packed  capacity/prefix")
    sub = (f"{'':>5} {'':>4} {'':>5} {'':>5} | "
           + " | ".join(f"{'graph us':>8} {'gpu us':>7} {'call us':>7} {'MB':>6} {'%4.3TB/s':>8}"
                        for _ in LAYOUTS)
           + " |  (graph time)   (graph time)")
    print()
    print(header)
    print(sub)
    print("-" * len(header))
    for row in results:
        cells = []
        for layout in LAYOUTS:
            r = row["layouts"][layout]
            cells.append(f"{r['graph_us']:8.2f} {r['gpu_us']:7.2f} {r['call_us']:7.2f} "
                         f"{r['bytes'] / 1e6:6.2f} {100 * r['tb_s'] / H200_COPY_TB_S:7.1f}%")
        timed = row["layouts"]
        ratio_pp = timed["prefix"]["graph_us"] / timed["packed"]["graph_us"]
        ratio_cp = timed["capacity"]["graph_us"] / timed["prefix"]["graph_us"]
        row["prefix_over_packed"] = ratio_pp
        row["capacity_over_prefix"] = ratio_cp
        print(f"{row['capacity']:5d} {row['requests']:4d} {row['tokens']:5d} {row['width']:5d} | "
              + " | ".join(cells) + f" | {ratio_pp:13.3f}  {ratio_cp:14.2f}")

    big = [r for r in results if r["capacity"] == 8192]
    if big:
        worst = max(r["prefix_over_packed"] for r in big)
        within = sum(r["prefix_over_packed"] <= 1.05 for r in big)
        faster = sum(r["capacity_over_prefix"] >= 1.2 for r in big)
        print()
        print(f"goal at capacity 8192: prefix within 5% of packed at {within}/{len(big)} batch "
              f"sizes (worst ratio {worst:.3f}); capacity >= 1.2x slower than prefix at "
              f"{faster}/{len(big)}")
    print(f"kernel variants compiled: {c128a_kernel.compiled_variant_count()}")

    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(dict(device=gpu_name, copy_tb_s=copy_tb_s, results=results), handle,
                      indent=2)


if __name__ == "__main__":
    main()
