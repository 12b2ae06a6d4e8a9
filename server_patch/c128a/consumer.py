"""A decode-index consumer whose row layout is frozen at "capture".

On a GPU, FlashMLA's sparse decode kernel captured in a FULL CUDA graph keeps
the pointer, row stride and width of the index tensor it saw at capture, and at
replay reads whatever the builder has since written there. This class does the
same on any device without a graph: it records the captured view's storage
offset, stride and width, and later reads the *buffer's memory* through them,
ignoring the views a builder returns. That is enough to show, on a CPU, that
the packed layout feeds rows >= 1 the wrong slot ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class FrozenRows:
    """Rows of a buffer at the storage offset, row stride and width of a captured view."""

    buffer: torch.Tensor
    storage_offset: int
    row_stride: int
    width: int

    @classmethod
    def capture(cls, buffer: torch.Tensor, captured_view: torch.Tensor) -> FrozenRows:
        """Freeze the layout of ``captured_view``, a view returned by a capture-time build.

        A ``[T, 1, W]`` view (what vLLM hands FlashMLA) is accepted as well as ``[T, W]``.
        """
        if captured_view.untyped_storage().data_ptr() != buffer.untyped_storage().data_ptr():
            raise ValueError("the captured view does not live in the buffer it is read from")
        return cls(buffer, int(captured_view.storage_offset()), captured_view.stride(0),
                   captured_view.shape[-1])

    def view(self, num_rows: int) -> torch.Tensor:
        """The first ``num_rows`` rows where the captured layout places them."""
        return self.buffer.as_strided((num_rows, self.width), (self.row_stride, 1),
                                      self.storage_offset)

    def read(self, num_rows: int) -> torch.Tensor:
        return self.view(num_rows).to(torch.int64)


def within_lengths(rows: torch.Tensor, lens: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Each row's first ``lens[r]`` entries, -1 past them (the consumer never reads those)."""
    n = lens.to(torch.int64).unsqueeze(1)
    return torch.where(cols.unsqueeze(0) < n, rows.to(torch.int64), -1)


@dataclass(frozen=True)
class FrozenDecodeReader:
    """Reads ``(rows, width)`` decode indices at a row stride fixed at capture."""

    rows: FrozenRows
    decode_lens_buffer: torch.Tensor

    @classmethod
    def capture(
        cls,
        global_decode_buffer: torch.Tensor,
        decode_lens_buffer: torch.Tensor,
        captured_view: torch.Tensor,
    ) -> FrozenDecodeReader:
        """Freeze the decode rows' layout (see ``FrozenRows.capture``)."""
        return cls(FrozenRows.capture(global_decode_buffer, captured_view), decode_lens_buffer)

    @property
    def width(self) -> int:
        return self.rows.width

    def read(self, num_rows: int) -> torch.Tensor:
        """The first ``decode_lens[r]`` indices of each row as the frozen consumer sees them.

        Entries past a row's length are -1, as the consumer never reads them.
        """
        rows = self.rows.view(num_rows)
        cols = torch.arange(self.width, device=rows.device)
        return within_lengths(rows, self.decode_lens_buffer[:num_rows], cols)
