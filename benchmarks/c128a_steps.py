"""The decode step every C128A benchmark times, written once.

DSpark verify steps (1 + 7 decode tokens per request) over a random block table, and
one builder call on them with vLLM's arguments. The kernel benchmarks
(``bench_c128a.py``, ``bench_c128a_upstream.py``, ``bench_guard.py``) must time the
same step, or their figures cannot be set beside each other. torch is imported where it
is used, so a script without it can still say so in one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

COMPRESS_RATIO = 128
BLOCK_SIZE = 256 // COMPRESS_RATIO
TOKENS_PER_REQUEST = 1 + 7  # DSpark verify steps: 1 + 7 speculative tokens
MAX_MODEL_LEN = {640: 70_000, 8192: 1_048_576}  # per buffer capacity
LAYOUTS = ("capacity", "prefix", "packed")


def parse_ints(text: str) -> list[int]:
    """`1,8,64` from the command line."""
    return [int(part) for part in text.split(",") if part.strip()]


def active_width(max_context: int, capacity: int) -> int:
    """The width vLLM's caller passes: the batch's compressed context rounded up to a
    power of two, at least 128, at most the capacity."""
    compressed = max(max_context // COMPRESS_RATIO, 1)
    return min(max(1 << (compressed - 1).bit_length(), 128), capacity)


def log_uniform_contexts(num_requests: int, low: int, high: int, gen: Any) -> Any:
    """Context lengths of a mixed batch, log-uniform in [low, high]."""
    import torch

    u = torch.rand(num_requests, generator=gen, dtype=torch.float64)
    return torch.exp(math.log(low) + (math.log(high) - math.log(low)) * u).long()


def decode_batch(contexts: Any, capacity: int, gen: Any, device: Any) -> dict[str, Any]:
    """The builder's inputs for one decode step of requests with these context lengths."""
    import torch

    num_requests = contexts.numel()
    positions = (contexts.unsqueeze(1) - TOKENS_PER_REQUEST
                 + torch.arange(TOKENS_PER_REQUEST)).reshape(-1)
    reqs = torch.arange(num_requests).repeat_interleave(TOKENS_PER_REQUEST)
    table = torch.randint(0, 1 << 20, (num_requests, -(-capacity // BLOCK_SIZE)), generator=gen)
    tokens = positions.numel()
    max_context = int(contexts.max())
    return dict(positions=positions.to(device),
                token_to_req_indices=reqs.to(torch.int32).to(device),
                block_table=table.to(torch.int32).to(device),
                slot_mapping=torch.arange(tokens, dtype=torch.int64, device=device),
                tokens=tokens, max_context=max_context,
                width=active_width(max_context, capacity))


def builder_call(fn: Callable[..., Any], b: dict[str, Any], buffers: tuple,
                 width: int) -> Callable[[], Any]:
    """One builder call on a prepared batch, as the engine makes it every step."""

    def call() -> Any:
        return fn(b["positions"], COMPRESS_RATIO, b["tokens"], b["token_to_req_indices"],
                  b["block_table"], BLOCK_SIZE, b["slot_mapping"], *buffers,
                  max_compressed_tokens=width)

    return call
