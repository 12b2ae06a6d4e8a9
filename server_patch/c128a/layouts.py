"""Where each layout puts C128A metadata rows in the persistent buffers.

The whole bug is a disagreement about *where rows live*: a consumer captured in
a FULL CUDA graph keeps the row stride it saw at capture, so the builder must
write every row at that same stride. This module is the single place that turns
a layout name and the call's buffers into the exact regions both
implementations (Triton kernel and torch reference) write, and the views the
builder returns. Keeping it in one place is what makes the two implementations
have identical memory effects.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

CAPACITY = "capacity"
PREFIX = "prefix"
PACKED = "packed"

#: The layouts a builder can be asked for (see ``plan`` for what each means).
LAYOUTS: tuple[str, ...] = (CAPACITY, PREFIX, PACKED)


@dataclass(frozen=True)
class Plan:
    """The regions one builder call writes, and the views it returns.

    ``decode_rows``/``prefill_rows`` are the views the implementations write
    into: exactly ``n x width`` elements at ``row_stride``. ``decode_out`` is
    what the builder returns for decode; it differs from ``decode_rows`` only
    for ``prefix`` on SM120, where the consumer needs the full-width slice.
    """

    layout: str
    num_decode_tokens: int
    num_prefill_tokens: int
    decode_width: int
    prefill_width: int
    decode_row_stride: int
    prefill_row_stride: int
    decode_rows: torch.Tensor
    prefill_rows: torch.Tensor
    decode_out: torch.Tensor
    decode_lens: torch.Tensor


@functools.cache
def _capability_major(device_index: int) -> int:
    return torch.cuda.get_device_capability(device_index)[0]


def needs_contiguous_decode(device: torch.device) -> bool:
    """Whether the decode consumer on this device needs a contiguous index view.

    FlashInfer's SM120 (capability major 12) paged path checks that the decode
    index tensor is contiguous (upstream PR #53574), so a ``[:n, :W]`` prefix
    slice would crash it; vLLM 0.29+ returns the full-width rows there.
    """
    if device.type != "cuda":
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _capability_major(index) == 12


def _check_buffer(name: str, buffer: torch.Tensor, rows: int) -> None:
    if buffer.dim() != 2:
        raise ValueError(f"{name} must be 2-D (rows, capacity), got shape {tuple(buffer.shape)}")
    if buffer.stride(1) != 1:
        raise ValueError(f"{name} rows must be contiguous (stride(-1) == 1)")
    if rows > buffer.shape[0]:
        raise ValueError(f"{name} has {buffer.shape[0]} rows, the batch needs {rows}")


def _packed_rows(buffer: torch.Tensor, rows: int, width: int) -> torch.Tensor:
    if not buffer.is_contiguous():
        raise ValueError("the packed layout needs a contiguous buffer (it views it flat)")
    return buffer.view(-1)[: rows * width].view(rows, width)


def plan(
    layout: str,
    *,
    num_tokens: int,
    num_decode_tokens: int,
    global_decode_buffer: torch.Tensor,
    decode_lens_buffer: torch.Tensor,
    prefill_buffer: torch.Tensor,
    max_compressed_tokens: int,
    full_width_decode: bool = False,
) -> Plan:
    """Decide rows, widths and strides for one call.

    - ``capacity``: width is each buffer's capacity, rows at ``buffer.stride(0)``,
      returns ``buffer[:n]`` (PR #51318). ``max_compressed_tokens`` is ignored:
      the capacity is what the capture-time consumer was built for.
    - ``prefix``: rows at ``buffer.stride(0)``, only the first
      ``max_compressed_tokens`` columns are written and returned (PR #52823):
      capture-safe, and the work scales with the active width.
    - ``packed``: rows at stride ``max_compressed_tokens`` (PR #50004, vLLM
      0.27.x). Wrong under a capture-frozen consumer; kept as the positive control.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown C128A layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    num_prefill_tokens = num_tokens - num_decode_tokens
    if not 0 <= num_decode_tokens <= num_tokens:
        raise ValueError(
            f"num_decode_tokens={num_decode_tokens} must be within 0..{num_tokens} (the tokens)"
        )
    _check_buffer("global_decode_buffer", global_decode_buffer, num_decode_tokens)
    _check_buffer("prefill_buffer", prefill_buffer, num_prefill_tokens)
    if decode_lens_buffer.dim() != 1 or decode_lens_buffer.shape[0] < num_decode_tokens:
        raise ValueError("decode_lens_buffer must be 1-D with a slot per decode token")

    decode_lens = decode_lens_buffer[:num_decode_tokens]
    if layout == CAPACITY:
        decode_rows = global_decode_buffer[:num_decode_tokens]
        prefill_rows = prefill_buffer[:num_prefill_tokens]
        return Plan(
            layout=layout,
            num_decode_tokens=num_decode_tokens,
            num_prefill_tokens=num_prefill_tokens,
            decode_width=global_decode_buffer.shape[1],
            prefill_width=prefill_buffer.shape[1],
            decode_row_stride=global_decode_buffer.stride(0),
            prefill_row_stride=prefill_buffer.stride(0),
            decode_rows=decode_rows,
            prefill_rows=prefill_rows,
            decode_out=decode_rows,
            decode_lens=decode_lens,
        )

    width = int(max_compressed_tokens)
    capacity = min(global_decode_buffer.shape[1], prefill_buffer.shape[1])
    if not 0 < width <= capacity:
        raise ValueError(
            f"max_compressed_tokens={width} must be within 1..{capacity} (the buffers' capacity)"
        )
    if layout == PREFIX:
        decode_rows = global_decode_buffer[:num_decode_tokens, :width]
        prefill_rows = prefill_buffer[:num_prefill_tokens, :width]
        decode_out = (
            global_decode_buffer[:num_decode_tokens] if full_width_decode else decode_rows
        )
        decode_stride, prefill_stride = global_decode_buffer.stride(0), prefill_buffer.stride(0)
    else:
        decode_rows = _packed_rows(global_decode_buffer, num_decode_tokens, width)
        prefill_rows = _packed_rows(prefill_buffer, num_prefill_tokens, width)
        decode_out = decode_rows
        decode_stride = prefill_stride = width
    return Plan(
        layout=layout,
        num_decode_tokens=num_decode_tokens,
        num_prefill_tokens=num_prefill_tokens,
        decode_width=width,
        prefill_width=width,
        decode_row_stride=decode_stride,
        prefill_row_stride=prefill_stride,
        decode_rows=decode_rows,
        prefill_rows=prefill_rows,
        decode_out=decode_out,
        decode_lens=decode_lens,
    )
