"""Our C128A builder beside upstream vLLM's own, on the same inputs, on a GPU.

The plugin puts our builder where vLLM's was, on every decode step, so upstream's own
builder is the anchor: per layout, the release whose builder writes that layout
(capacity: vLLM 0.28.0, #51318; prefix: 0.32.0, #52823; packed: 0.27.1, #50004), run
from its blob-pinned ``sparse_mla.py`` (``benchmarks/upstream_c128a.py``; no vLLM
install). For 1..256 requests of 1 + 7 decode tokens (DSpark verify steps) with mixed
contexts, at capacities 640 (max_model_len 70000) and 8192 (1M context):

- ``graph us``: device time per call: ``--graph-calls`` calls captured in one CUDA
  graph, replayed ``--graph-replays`` times, all variants interleaved, median. vLLM
  replays captured graphs, so this is the time the GPU spends; the goal is ours within
  5% of upstream's for the same layout;
- ``host us``: what the decode step pays on the host before replay: the wall time of
  ``--host-calls`` back-to-back calls without a synchronisation (the launches queue),
  per call, median of ``--host-trials`` interleaved trials. Ours bare and as the
  plugin installs it (stride guard + first-call observer), upstream bare and under the
  stride guard (what layout ``off`` runs), and ours through Triton's own launch path
  (``lean off``) to show what the cached-kernel launch saves. The goal is ours no
  slower than upstream's, bare against bare and guarded against guarded;
- ``MB`` written per call (rows plus decode lengths) and that rate's share of the
  device-to-device copy rate measured at start (bytes read plus written).

Before any timing, each configuration runs ours and upstream's into separate
poisoned buffers: both must write the same cells and return the same views, or the
benchmark stops.

Usage, from the repository root, on a machine with a CUDA GPU, torch and triton:
    PYTHONPATH=. python benchmarks/bench_c128a_upstream.py [--upstream-cache DIR] [--json F]
The upstream files come from ``--upstream-cache`` (default: ``$DSV4_QUAL_CACHE`` or
``~/.cache/dsv4-qual``), fetched there with ``pip download`` when missing; fill it on a
machine with an index and copy it to one without.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

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

HERE = Path(__file__).resolve().parent
GRAPH_GOAL = 1.05  # ours / upstream graph time
POISON = -7


def _fail(message: str) -> NoReturn:
    print(f"bench_c128a_upstream: {message}", file=sys.stderr)
    sys.exit(2)


def _default_cache() -> Path:
    return Path(os.environ.get("DSV4_QUAL_CACHE") or Path.home() / ".cache" / "dsv4-qual")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacities", type=parse_ints, default=[640, 8192])
    parser.add_argument("--requests", type=parse_ints,
                        default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--context-min", type=int, default=2_000)
    parser.add_argument("--context-max", type=int, default=48_000,
                        help="longest context in the mix (tokens); sets the active width")
    parser.add_argument("--graph-calls", type=int, default=20, help="calls per captured graph")
    parser.add_argument("--graph-replays", type=int, default=60, help="timed replays per graph")
    parser.add_argument("--host-calls", type=int, default=32,
                        help="back-to-back calls per host-time trial (they must not fill the "
                             "launch queue)")
    parser.add_argument("--host-trials", type=int, default=40)
    parser.add_argument("--upstream-cache", type=Path, default=_default_cache(),
                        help="cache root holding upstream/vllm-<release>/ (blob-checked)")
    parser.add_argument("--json", help="also write the results as JSON to this path")
    return parser.parse_args()


def _upstream_builders(layouts: list[str], cache: Path) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent / "tests" / "vllm"))
    import upstream_c128a
    import upstream_sources

    builders = {}
    for layout in layouts:
        release = upstream_c128a.RELEASE_OF_LAYOUT[layout]
        try:
            files = upstream_sources.release_files(release, cache, Path(sys.executable))
        except Exception as err:  # no index here, a wrong cache, a failed download
            _fail(f"no blob-checked vllm {release} files under {cache}/upstream ({err}); "
                  f"fill that cache where pip can download (see upstream_sources.py) and "
                  f"pass --upstream-cache")
        builders[layout] = (release, upstream_c128a.load_builder(release, files))
    return builders


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
    layouts = [x for x in args.layouts.split(",") if x]
    if not set(layouts) <= set(LAYOUTS):
        _fail(f"--layouts must be among {', '.join(LAYOUTS)}")

    from server_patch.c128a import builder, observe_first_call
    from server_patch.c128a import kernel as c128a_kernel
    from server_patch.guard import StrideGuard
    from server_patch.guard_sinks import standard_sinks
    from server_patch.receipts import Receipt

    device = torch.device("cuda")
    start = time.perf_counter()
    c128a_kernel.warm_up()
    warm_up_ms = 1e3 * (time.perf_counter() - start)
    upstream = _upstream_builders(layouts, args.upstream_cache)
    gen = torch.Generator().manual_seed(50004)

    quiet = logging.getLogger("bench_c128a_upstream.quiet")  # packed's violation warning
    quiet.setLevel(logging.ERROR)
    receipts_dir = tempfile.TemporaryDirectory()
    receipt = Receipt(receipts_dir.name, {"layout": "bench"})

    def guard() -> StrideGuard:
        """The plugin's guard: counting, receipt + Prometheus sinks, 5 s flushes."""
        return StrideGuard("1", sinks=standard_sinks(lambda: receipt), log=quiet)

    def batch(num_requests: int, capacity: int) -> dict[str, Any]:
        high = min(args.context_max, MAX_MODEL_LEN[capacity])
        contexts = log_uniform_contexts(num_requests, args.context_min, high, gen)
        return decode_batch(contexts, capacity, gen, device)

    def poisoned(rows: int, capacity: int) -> tuple:
        return (torch.full((rows, capacity), POISON, dtype=torch.int32, device=device),
                torch.full((rows,), POISON, dtype=torch.int32, device=device),
                torch.full((rows, capacity), POISON, dtype=torch.int32, device=device))

    def same_effect(ours_call: Callable[[], Any], up_call: Callable[[], Any],
                    ours_bufs: tuple, up_bufs: tuple) -> str | None:
        ours_out, up_out = ours_call(), up_call()
        torch.cuda.synchronize()
        for name, a, b in zip(("decode buffer", "lens buffer", "prefill buffer"),
                              ours_bufs, up_bufs, strict=True):
            if not torch.equal(a, b):
                return f"{name} differs"
        for name, a, b in zip(("decode view", "lens view", "prefill view"),
                              ours_out, up_out, strict=True):
            if a.shape != b.shape or a.stride() != b.stride() or not torch.equal(a, b):
                return f"{name} differs ({tuple(a.shape)}/{a.stride()} vs "\
                       f"{tuple(b.shape)}/{b.stride()})"
        return None

    def host_times_us(calls: dict[str, tuple[Callable[[], Any], bool]]) -> dict[str, float]:
        """Host time per call; the bool says whether our lean launch path is on for it."""
        samples: dict[str, list[float]] = {name: [] for name in calls}
        launcher = c128a_kernel.LAUNCHER
        for call, lean in calls.values():  # warm: first calls, one-time work
            launcher.lean = lean
            call()
            call()
        for trial in range(args.host_trials):
            order = list(calls.items())
            for name, (call, lean) in order if trial % 2 == 0 else reversed(order):
                launcher.lean = lean
                torch.cuda.synchronize()
                begin = time.perf_counter()
                for _ in range(args.host_calls):
                    call()
                samples[name].append((time.perf_counter() - begin) / args.host_calls * 1e6)
        launcher.lean = True
        torch.cuda.synchronize()
        return {name: statistics.median(v) for name, v in samples.items()}

    copy_tb_s = copy_rate_tb_s(device)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, triton "
          f"{triton.__version__}; copy rate {copy_tb_s:.2f} TB/s (read+write); our kernel's "
          f"warm_up() {warm_up_ms:.0f} ms")
    print("upstream: " + ", ".join(f"{layout} = vllm {rel}"
                                   for layout, (rel, _) in upstream.items()))
    print(f"{TOKENS_PER_REQUEST} decode tokens per request, contexts log-uniform in "
          f"[{args.context_min}, {args.context_max}]; graph: {args.graph_calls} calls x "
          f"{args.graph_replays} replays; host: {args.host_calls} calls x "
          f"{args.host_trials} trials; medians")

    results: list[dict[str, Any]] = []
    rows_needed = max(args.requests) * TOKENS_PER_REQUEST + 64
    for capacity in args.capacities:
        buffers = poisoned(rows_needed, capacity)
        for num_requests in args.requests:
            b = batch(num_requests, capacity)
            for layout in layouts:
                release, up_fn = upstream[layout]
                ours_fn = builder(layout, impl="triton")
                # 0.28.0's caller passes the capacity; 0.29+ (and ours in vLLM) the width.
                up_width = capacity if layout == "capacity" else b["width"]
                ours_bufs, up_bufs = poisoned(rows_needed, capacity), poisoned(rows_needed,
                                                                               capacity)
                problem = same_effect(builder_call(ours_fn, b, ours_bufs, b["width"]),
                                      builder_call(up_fn, b, up_bufs, up_width),
                                      ours_bufs, up_bufs)
                del ours_bufs, up_bufs
                if problem:
                    _fail(f"ours ({layout}) and vllm {release} disagree at capacity {capacity}, "
                          f"{num_requests} requests: {problem}")
                ours = builder_call(ours_fn, b, buffers, b["width"])
                up = builder_call(up_fn, b, buffers, up_width)
                installed_fn = guard().wrap(observe_first_call(ours_fn, lambda _: None))
                installed = builder_call(installed_fn, b, buffers, b["width"])
                up_guarded = builder_call(guard().wrap(up_fn), b, buffers, up_width)
                graph = graph_times_us({"ours": ours, "upstream": up}, args.graph_calls,
                                       args.graph_replays)
                host = host_times_us({"ours": (ours, True), "installed": (installed, True),
                                      "upstream": (up, True), "upstream_guarded": (up_guarded,
                                                                                   True),
                                      "ours_triton_path": (ours, False)})
                written_cols = capacity if layout == "capacity" else b["width"]
                bytes_written = b["tokens"] * (written_cols + 1) * 4
                results.append(dict(
                    capacity=capacity, requests=num_requests, tokens=b["tokens"],
                    width=b["width"], layout=layout, release=release, bytes=bytes_written,
                    graph_us=graph, host_us=host,
                    copy_share={k: bytes_written / (v * 1e-6) / (copy_tb_s * 1e12)
                                for k, v in graph.items()},
                    graph_ratio=graph["ours"] / graph["upstream"],
                    host_goal=host["ours"] <= host["upstream"]
                    and host["installed"] <= host["upstream_guarded"],
                ))
        del buffers
        torch.cuda.empty_cache()

    _print_tables(results, layouts)
    variants = c128a_kernel.compiled_variant_count()
    print(f"\nour kernel: {variants} compiled variant(s) across every shape above")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                           triton=triton.__version__, copy_tb_s=copy_tb_s,
                           warm_up_ms=warm_up_ms, kernel_variants=variants, results=results),
                      handle, indent=2)


def _print_tables(results: list[dict[str, Any]], layouts: list[str]) -> None:
    for layout in layouts:
        rows = [r for r in results if r["layout"] == layout]
        if not rows:
            continue
        print(f"\n{layout}: ours vs vllm {rows[0]['release']}")
        print(f"{'cap':>5} {'reqs':>4} {'tok':>5} {'W':>4} {'MB':>6} | "
              f"{'graph us':>8} {'vllm':>6} {'ratio':>5} {'%copy':>5} | "
              f"{'host us':>7} {'+guard':>6} {'vllm':>6} {'+guard':>6} {'triton':>6} | goals")
        for r in rows:
            g, h = r["graph_us"], r["host_us"]
            goals = ("graph ok" if r["graph_ratio"] <= GRAPH_GOAL else "graph MISS") + ", " + (
                "host ok" if r["host_goal"] else "host MISS")
            print(f"{r['capacity']:5d} {r['requests']:4d} {r['tokens']:5d} {r['width']:4d} "
                  f"{r['bytes'] / 1e6:6.2f} | {g['ours']:8.2f} {g['upstream']:6.2f} "
                  f"{r['graph_ratio']:5.3f} {100 * r['copy_share']['ours']:4.1f}% | "
                  f"{h['ours']:7.2f} {h['installed']:6.2f} {h['upstream']:6.2f} "
                  f"{h['upstream_guarded']:6.2f} {h['ours_triton_path']:6.2f} | {goals}")
        worst = max(r["graph_ratio"] for r in rows)
        graph_ok = sum(r["graph_ratio"] <= GRAPH_GOAL for r in rows)
        host_ok = sum(r["host_goal"] for r in rows)
        margin = max(r["host_us"]["ours"] - r["host_us"]["upstream"] for r in rows)
        print(f"goals ({layout}): graph time within 5% of vllm {rows[0]['release']} at "
              f"{graph_ok}/{len(rows)} (worst ratio {worst:.3f}); host time no worse at "
              f"{host_ok}/{len(rows)} (worst ours - vllm {margin:+.2f} us bare)")
    print("\n(host us: ours bare, +guard: as the plugin installs it (stride guard + first-call "
          "observer); vllm bare, +guard: under the stride guard (layout off); triton: ours "
          "through Triton's own launch path, lean launch off)")


if __name__ == "__main__":
    main()
