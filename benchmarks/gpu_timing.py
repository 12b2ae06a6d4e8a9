"""How the kernel benchmarks time a GPU: written once so their figures compare.

``graph_times_us`` is the device time per call with launch latency taken out (calls
captured in one CUDA graph, replays interleaved across variants so clock drift hits
them alike, median); ``copy_rate_tb_s`` is the device-to-device copy rate that write
bandwidth is set against.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any


def copy_rate_tb_s(device: Any) -> float:
    """Bytes read plus written per second by a 1 GiB device copy, in TB/s."""
    import torch
    import triton.testing

    src = torch.empty(1 << 28, dtype=torch.int32, device=device)  # 1 GiB
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=10, rep=200,
                                 return_mode="median")
    return 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e12


def graph_times_us(calls: dict[str, Callable[[], Any]], graph_calls: int,
                   graph_replays: int) -> dict[str, float]:
    """Per-call device time of each variant, from replays of captured call chains."""
    import torch

    graphs = {}
    stream = torch.cuda.Stream()
    for name, call in calls.items():
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(graph_calls):
                call()
        graphs[name] = graph
    samples: dict[str, list[float]] = {name: [] for name in calls}
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(graph_replays):
        for name, graph in graphs.items():  # interleaved
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            samples[name].append(start.elapsed_time(stop) * 1e3 / graph_calls)
    return {name: statistics.median(v) for name, v in samples.items()}
