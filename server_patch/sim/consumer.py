"""The consumers of a FULL graph: they read metadata rows at the capture stride.

On `--device cuda` each is a real `torch.cuda.CUDAGraph` captured once at the maximum
batch and replayed on every step the graph mode captures: the graph keeps the
pointers and the row stride of capture and reads whatever the builder has written
there since. On the CPU, `FrozenDecodeReader` and `FrozenRows` do the same arithmetic
without a graph. The decode consumer reads each row's first `decode_lens[r]` slot ids
(FlashMLA's `topk_length`); the prefill consumer reads the local indices of each
prefill row (sparse prefill attention), bounded by the engine to the token's causal
count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from server_patch.c128a import FrozenDecodeReader


class DecodeConsumer(Protocol):
    def read(self, num_rows: int) -> torch.Tensor:
        """Slot ids each decode row's attention reads; -1 past a row's length."""
        ...


class CudaGraphConsumer:
    """A CUDA graph whose body reads `max_rows` decode rows at the captured stride."""

    def __init__(self, buffer: torch.Tensor, lens: torch.Tensor, captured_view: torch.Tensor,
                 max_rows: int) -> None:
        frozen = FrozenDecodeReader.capture(buffer, lens, captured_view)
        self.max_rows = max_rows
        self.out = torch.empty((max_rows, frozen.width), dtype=torch.int64, device=buffer.device)
        # Every tensor the graph reads must outlive it: a graph keeps addresses, not
        # references, and a freed input's memory is soon another tensor's.
        self._cols = torch.arange(frozen.width, device=buffer.device)
        self._rows = buffer.as_strided((max_rows, frozen.width), (frozen.row_stride, 1),
                                       frozen.storage_offset)
        self._lens = lens
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up outside the capture, as vLLM does
            self._body(self._rows, self._lens, self._cols)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._body(self._rows, self._lens, self._cols)

    def _body(self, rows: torch.Tensor, lens: torch.Tensor, cols: torch.Tensor) -> None:
        n = lens[: self.max_rows].to(torch.int64).unsqueeze(1)
        self.out.copy_(torch.where(cols.unsqueeze(0) < n, rows.to(torch.int64), -1))

    def read(self, num_rows: int) -> torch.Tensor:
        self.graph.replay()
        return self.out[:num_rows]


class RowConsumer(Protocol):
    def read(self, num_rows: int) -> torch.Tensor:
        """The first `num_rows` rows, as the captured layout places them."""
        ...


@dataclass(frozen=True)
class FrozenRows:
    """Rows of a buffer at the storage offset, stride and width of a captured view."""

    buffer: torch.Tensor
    storage_offset: int
    row_stride: int
    width: int

    @classmethod
    def capture(cls, buffer: torch.Tensor, captured_view: torch.Tensor) -> FrozenRows:
        if captured_view.untyped_storage().data_ptr() != buffer.untyped_storage().data_ptr():
            raise ValueError("the captured view does not live in the buffer")
        return cls(buffer, captured_view.storage_offset(), captured_view.stride(0),
                   captured_view.shape[-1])

    def read(self, num_rows: int) -> torch.Tensor:
        return self.buffer.as_strided((num_rows, self.width), (self.row_stride, 1),
                                      self.storage_offset).to(torch.int64)


class CudaGraphRows:
    """A CUDA graph whose body copies `max_rows` rows out at the captured layout."""

    def __init__(self, buffer: torch.Tensor, captured_view: torch.Tensor, max_rows: int) -> None:
        frozen = FrozenRows.capture(buffer, captured_view)
        self.out = torch.empty((max_rows, frozen.width), dtype=torch.int64, device=buffer.device)
        self._rows = buffer.as_strided((max_rows, frozen.width), (frozen.row_stride, 1),
                                       frozen.storage_offset)  # kept alive: see above
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.out.copy_(self._rows)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out.copy_(self._rows)

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
