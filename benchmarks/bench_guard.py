"""What the stride guard costs: builder calls per second with and without it.

For each device (the CPU with the torch reference; CUDA with the Triton kernel
when a GPU is present) and layout, it times back-to-back calls of the bare
builder and of the same builder under a counting guard, alternating the two in
each trial so drift hits both alike, and prints the medians side by side.
Under ``packed`` every call is a violation, so that row times the guard's
violation path too.

Also printed:
- ``guard alone``: the guard wrapped around a builder that does nothing but
  return ready views, i.e. the guard's own time per call on any device;
- ``flush``: one periodic flush with the plugin's sinks (receipt file
  rewritten whole without fsync, plus Prometheus counters when importable),
  which happens at most once per flush interval (5 s by default); only the
  write that first carries a violation is fsync'd, once.

On a GPU the loop measures host time per call with the launches queued
asynchronously, which is where a host-side wrapper's cost shows; the device
is synchronized before and after each trial.

Usage, from the repository root:
    PYTHONPATH=. python benchmarks/bench_guard.py [--device cpu|cuda|all] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from c128a_steps import (
    BLOCK_SIZE,
    COMPRESS_RATIO,
    LAYOUTS,
    TOKENS_PER_REQUEST,
    builder_call,
    decode_batch,
)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda", "all"), default="auto",
                        help="auto: the CPU, and CUDA too when present")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--capacity", type=int, default=640,
                        help="buffer capacity (640: max_model_len 70000)")
    parser.add_argument("--requests", type=int, default=64, help="decode requests per batch")
    parser.add_argument("--width", type=int, default=512,
                        help="active width (max_compressed_tokens), below the capacity")
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--trial-s", type=float, default=0.3,
                        help="target seconds per trial and variant (sets the calls per trial)")
    parser.add_argument("--cpu-threads", type=int, default=1,
                        help="torch intra-op threads on the CPU (1: least noise on a shared host)")
    parser.add_argument("--json", help="also write the results as JSON to this path")
    return parser.parse_args()


def _batch(torch: Any, device: Any, requests: int, capacity: int, width: int) -> dict[str, Any]:
    """One decode step whose contexts all fit the given width, with its buffers."""
    gen = torch.Generator().manual_seed(52448)
    contexts = torch.randint(COMPRESS_RATIO * 2, width * COMPRESS_RATIO, (requests,),
                             generator=gen)
    b = decode_batch(contexts, capacity, gen, device)
    rows = b["tokens"] + 16
    b["buffers"] = (torch.full((rows, capacity), -1, dtype=torch.int32, device=device),
                    torch.zeros(rows, dtype=torch.int32, device=device),
                    torch.full((rows, capacity), -1, dtype=torch.int32, device=device))
    return b


def _caller(fn: Callable[..., Any], b: dict[str, Any], width: int) -> Callable[[], Any]:
    return builder_call(fn, b, b["buffers"], width)


def _calls_per_trial(call: Callable[[], Any], sync: Callable[[], None], target_s: float) -> int:
    n = 1
    while True:
        sync()
        start = time.perf_counter()
        for _ in range(n):
            call()
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= target_s / 4 or n >= 1 << 22:
            return max(1, math.ceil(n * target_s / max(elapsed, 1e-9)))
        n *= 4


def _side_by_side(bare: Callable[[], Any], guarded: Callable[[], Any],
                  sync: Callable[[], None], trials: int, target_s: float) -> dict[str, Any]:
    """Median calls per second of each, alternating which goes first in each trial."""
    bare()
    guarded()  # warm-up (and, for packed, the first violation's one-time work)
    n = _calls_per_trial(bare, sync, target_s)
    rates: dict[str, list[float]] = {"bare": [], "guarded": []}
    for trial in range(trials):
        order = (("bare", bare), ("guarded", guarded))
        for name, call in order if trial % 2 == 0 else reversed(order):
            sync()
            start = time.perf_counter()
            for _ in range(n):
                call()
            sync()
            rates[name].append(n / (time.perf_counter() - start))
    bare_rate = statistics.median(rates["bare"])
    guarded_rate = statistics.median(rates["guarded"])
    return dict(
        calls_per_trial=n,
        bare_calls_s=bare_rate,
        guarded_calls_s=guarded_rate,
        overhead_pct=100.0 * (bare_rate / guarded_rate - 1.0),
        overhead_us=1e6 * (1.0 / guarded_rate - 1.0 / bare_rate),
    )


def main() -> None:
    args = _args()
    import torch

    torch.set_num_threads(args.cpu_threads)
    from server_patch.c128a import builder
    from server_patch.guard import StrideGuard
    from server_patch.guard_sinks import standard_sinks
    from server_patch.receipts import Receipt

    if not 0 < args.width <= args.capacity:
        sys.exit("bench_guard: --width must be within 1..--capacity")
    has_cuda = torch.cuda.is_available()
    if args.device == "cuda" and not has_cuda:
        sys.exit("bench_guard: --device cuda needs a CUDA GPU")
    devices = {"cpu": ["cpu"], "cuda": ["cuda"],
               "auto": ["cpu", "cuda"] if has_cuda else ["cpu"],
               "all": ["cpu", "cuda"]}[args.device]
    if "cuda" in devices and not has_cuda:
        sys.exit("bench_guard: --device all needs a CUDA GPU")
    layouts = [x for x in args.layouts.split(",") if x]

    print(f"torch {torch.__version__} ({args.cpu_threads} CPU thread(s)); {args.requests} "
          f"requests x {TOKENS_PER_REQUEST} decode tokens, capacity {args.capacity}, "
          f"width {args.width}; median of {args.trials} trials of ~{args.trial_s} s per variant")
    results: list[dict[str, Any]] = []
    quiet = logging.getLogger("bench_guard.quiet")  # the packed rows' violation warning
    quiet.setLevel(logging.ERROR)
    receipts_dir = tempfile.TemporaryDirectory()
    receipt = Receipt(receipts_dir.name, {"layout": "bench"})
    for device_name in devices:
        device = torch.device(device_name)
        impl = "triton" if device.type == "cuda" else "torch"
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        b = _batch(torch, device, args.requests, args.capacity, args.width)
        for layout in layouts:
            bare_fn = builder(layout, impl=impl)
            # The plugin's configuration: receipt + Prometheus sinks, 5 s interval.
            guard = StrideGuard("1", sinks=standard_sinks(lambda: receipt), log=quiet)
            row = dict(device=device_name, impl=impl, layout=layout, tokens=b["tokens"],
                       **_side_by_side(_caller(bare_fn, b, args.width),
                                       _caller(guard.wrap(bare_fn), b, args.width),
                                       sync, args.trials, args.trial_s))
            snap = guard.snapshot()
            row["violations_per_call"] = snap["violations"] / max(snap["calls"], 1)
            results.append(row)

    # The guard's own time: around a builder that only returns ready views.
    cpu = _batch(torch, torch.device("cpu"), args.requests, args.capacity, args.width)
    ready = (cpu["buffers"][0][: cpu["tokens"]], cpu["buffers"][1][: cpu["tokens"]],
             cpu["buffers"][2][:0])
    nothing = lambda *a, **k: ready  # noqa: E731
    alone = _side_by_side(_caller(nothing, cpu, args.width),
                          _caller(StrideGuard("1").wrap(nothing), cpu, args.width),
                          lambda: None, args.trials, args.trial_s)
    flush_guard = StrideGuard("1", sinks=standard_sinks(lambda: receipt))
    flush_guard.wrap(nothing)(cpu["positions"], COMPRESS_RATIO, cpu["tokens"], None, None,
                              BLOCK_SIZE, None, *cpu["buffers"], max_compressed_tokens=args.width)
    flush_times = []
    for _ in range(20):
        start = time.perf_counter()
        flush_guard.flush()
        flush_times.append(time.perf_counter() - start)
    flush_ms = 1e3 * statistics.median(flush_times)
    receipts_dir.cleanup()

    header = (f"{'device':>6} {'impl':>6} {'layout':>8} | {'bare calls/s':>13} "
              f"{'guarded calls/s':>15} | {'overhead':>8} {'us/call':>8} | violations/call")
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['device']:>6} {r['impl']:>6} {r['layout']:>8} | {r['bare_calls_s']:13,.0f} "
              f"{r['guarded_calls_s']:15,.0f} | {r['overhead_pct']:7.2f}% "
              f"{r['overhead_us']:8.2f} | {r['violations_per_call']:.2f}")
    print()
    print(f"guard alone (around a builder that does nothing): "
          f"{alone['overhead_us']:.2f} us per call "
          f"({alone['bare_calls_s']:,.0f} -> {alone['guarded_calls_s']:,.0f} calls/s)")
    print(f"flush (receipt rewritten whole, Prometheus when importable): "
          f"{flush_ms:.2f} ms, at most once per 5 s by default "
          f"({100 * flush_ms / 5000:.3f}% of the time)")

    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(dict(results=results, guard_alone=alone, flush_ms=flush_ms,
                           torch=torch.__version__, args=vars(args)), handle, indent=2)


if __name__ == "__main__":
    main()
