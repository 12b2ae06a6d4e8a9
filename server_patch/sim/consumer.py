"""The consumers of a FULL graph: they read metadata rows at the capture stride.

On `--device cuda` each is a real `torch.cuda.CUDAGraph` captured once at the maximum
batch and replayed on every step the graph mode captures: the graph keeps the
pointers and the row stride of capture and reads whatever the builder has written
there since. On the CPU, `FrozenDecodeReader` and `FrozenRows` (server_patch.c128a) do
the same arithmetic without a graph. The decode consumer reads each row's first
`decode_lens[r]` slot ids (FlashMLA's `topk_length`); the prefill consumer reads the
local indices of each prefill row (sparse prefill attention), bounded by the engine to
the token's causal count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from server_patch.c128a.consumer import FrozenDecodeReader, FrozenRows, within_lengths


class DecodeConsumer(Protocol):
    def read(self, num_rows: int) -> torch.Tensor:
        """Slot ids each decode row's attention reads; -1 past a row's length."""
        ...


def capture_graph(body: Callable[[], object]) -> torch.cuda.CUDAGraph:
    """`body` captured in a CUDA graph, after a warm-up run on a side stream (as vLLM
    warms up before it captures). Every tensor the body reads must outlive the graph: a
    graph keeps addresses, not references, and a freed input's memory is soon another
    tensor's."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        body()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph


class CudaGraphConsumer:
    """A CUDA graph whose body reads `max_rows` decode rows at the captured stride."""

    def __init__(self, buffer: torch.Tensor, lens: torch.Tensor, captured_view: torch.Tensor,
                 max_rows: int) -> None:
        frozen = FrozenRows.capture(buffer, captured_view)
        self.out = torch.empty((max_rows, frozen.width), dtype=torch.int64, device=buffer.device)
        rows, lens, cols = frozen.view(max_rows), lens[:max_rows], torch.arange(
            frozen.width, device=buffer.device)
        self._inputs = (rows, lens, cols)  # kept alive for the graph (see capture_graph)
        self.graph = capture_graph(lambda: self.out.copy_(within_lengths(rows, lens, cols)))

    def read(self, num_rows: int) -> torch.Tensor:
        self.graph.replay()
        return self.out[:num_rows]


class RowConsumer(Protocol):
    def read(self, num_rows: int) -> torch.Tensor:
        """The first `num_rows` rows, as the captured layout places them."""
        ...


class CudaGraphRows:
    """A CUDA graph whose body copies `max_rows` rows out at the captured layout."""

    def __init__(self, buffer: torch.Tensor, captured_view: torch.Tensor, max_rows: int) -> None:
        frozen = FrozenRows.capture(buffer, captured_view)
        self.out = torch.empty((max_rows, frozen.width), dtype=torch.int64, device=buffer.device)
        self._rows = frozen.view(max_rows)  # kept alive for the graph (see capture_graph)
        self.graph = capture_graph(lambda: self.out.copy_(self._rows))

    def read(self, num_rows: int) -> torch.Tensor:
        self.graph.replay()
        return self.out[:num_rows]


def make_row_consumer(buffer: torch.Tensor, captured_view: torch.Tensor,
                      max_rows: int) -> RowConsumer:
    if buffer.is_cuda:
        return CudaGraphRows(buffer, captured_view, max_rows)
    return FrozenRows.capture(buffer, captured_view)


def make_consumer(buffer: torch.Tensor, lens: torch.Tensor, captured_view: torch.Tensor,
                  max_rows: int) -> DecodeConsumer:
    if buffer.is_cuda:
        return CudaGraphConsumer(buffer, lens, captured_view, max_rows)
    return FrozenDecodeReader.capture(buffer, lens, captured_view)
