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
from collections.abc import Callable
from typing import NamedTuple

import torch

CAPACITY = "capacity"
PREFIX = "prefix"
PACKED = "packed"

#: The layouts a builder can be asked for (see ``plan`` for what each means).
LAYOUTS: tuple[str, ...] = (CAPACITY, PREFIX, PACKED)


def expected_violations(layout: str, runner: str) -> str | None:
    """Why a stride guard is to expect violations from `runner` (this server, this sim):
    ``packed`` is the positive control, the bug left in on purpose; no other layout may
    leave a row off the capacity stride."""
    if layout != PACKED:
        return None
    return f"{runner} runs the packed layout on purpose (the positive control: the bug left in)"


class Plan(NamedTuple):
    """The regions one builder call writes, and the views it returns.

    ``decode_rows``/``prefill_rows`` are the views the implementations write
    into: exactly ``n x width`` elements at ``row_stride``. ``decode_out`` is
    what the builder returns for decode; it differs from ``decode_rows`` only
    for ``prefix`` on SM120, where the consumer needs the full-width slice.
    (A named tuple: one is made per decode step, and it is the cheapest
    immutable record to make.)
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


def _row_stride_and_capacity(name: str, buffer: torch.Tensor, rows: int) -> tuple[int, int]:
    """A persistent buffer's (row stride, capacity), once it is known to hold ``rows`` rows."""
    shape, strides = buffer.shape, buffer.stride()
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D (rows, capacity), got shape {tuple(shape)}")
    if strides[1] != 1:
        raise ValueError(f"{name} rows must be contiguous (stride(-1) == 1)")
    if rows > shape[0]:
        raise ValueError(f"{name} has {shape[0]} rows, the batch needs {rows}")
    return strides[0], shape[1]


# Views are made with ``as_strided`` (the offset stays the buffer's): one call per view,
# where ``buffer[:n, :w]`` takes two and ``view(-1)[:k].view(n, w)`` three, on every
# decode step. Bounds are checked by torch against the storage, and by the planners first.


def _packed_rows(buffer: torch.Tensor, rows: int, width: int) -> torch.Tensor:
    if not buffer.is_contiguous():
        raise ValueError("the packed layout needs a contiguous buffer (it views it flat)")
    return buffer.as_strided((rows, width), (width, 1))


def planner(layout: str) -> Planner:
    """The function that plans one builder call in ``layout``.

    It takes ``(num_tokens, num_decode_tokens, global_decode_buffer,
    decode_lens_buffer, prefill_buffer, max_compressed_tokens, full_width_decode)``
    positionally (it runs on every decode step) and returns the ``Plan``:

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
    return _PLANNERS[layout]


def _common(
    num_tokens: int,
    num_decode_tokens: int,
    global_decode_buffer: torch.Tensor,
    decode_lens_buffer: torch.Tensor,
    prefill_buffer: torch.Tensor,
) -> tuple[int, int, int, int, int, torch.Tensor]:
    """Checks every layout makes: (prefill tokens, decode row stride, decode capacity,
    prefill row stride, prefill capacity, decode lens view)."""
    num_prefill_tokens = num_tokens - num_decode_tokens
    if not 0 <= num_decode_tokens <= num_tokens:
        raise ValueError(
            f"num_decode_tokens={num_decode_tokens} must be within 0..{num_tokens} (the tokens)"
        )
    decode_stride, decode_capacity = _row_stride_and_capacity(
        "global_decode_buffer", global_decode_buffer, num_decode_tokens)
    prefill_stride, prefill_capacity = _row_stride_and_capacity(
        "prefill_buffer", prefill_buffer, num_prefill_tokens)
    lens_shape = decode_lens_buffer.shape
    if len(lens_shape) != 1 or lens_shape[0] < num_decode_tokens:
        raise ValueError("decode_lens_buffer must be 1-D with a slot per decode token")
    decode_lens = decode_lens_buffer.as_strided((num_decode_tokens,), decode_lens_buffer.stride())
    return (num_prefill_tokens, decode_stride, decode_capacity, prefill_stride, prefill_capacity,
            decode_lens)


def _active_width(max_compressed_tokens: int, decode_capacity: int, prefill_capacity: int) -> int:
    width = int(max_compressed_tokens)
    capacity = decode_capacity if decode_capacity < prefill_capacity else prefill_capacity
    if not 0 < width <= capacity:
        raise ValueError(
            f"max_compressed_tokens={width} must be within 1..{capacity} (the buffers' capacity)"
        )
    return width


def _plan_capacity(num_tokens: int, num_decode_tokens: int, global_decode_buffer: torch.Tensor,
                   decode_lens_buffer: torch.Tensor, prefill_buffer: torch.Tensor,
                   max_compressed_tokens: int, full_width_decode: bool = False) -> Plan:
    num_prefill, decode_stride, decode_cap, prefill_stride, prefill_cap, lens = _common(
        num_tokens, num_decode_tokens, global_decode_buffer, decode_lens_buffer, prefill_buffer)
    decode_rows = global_decode_buffer.as_strided((num_decode_tokens, decode_cap),
                                                  (decode_stride, 1))
    prefill_rows = prefill_buffer.as_strided((num_prefill, prefill_cap), (prefill_stride, 1))
    return Plan(CAPACITY, num_decode_tokens, num_prefill, decode_cap, prefill_cap, decode_stride,
                prefill_stride, decode_rows, prefill_rows, decode_rows, lens)


def _plan_prefix(num_tokens: int, num_decode_tokens: int, global_decode_buffer: torch.Tensor,
                 decode_lens_buffer: torch.Tensor, prefill_buffer: torch.Tensor,
                 max_compressed_tokens: int, full_width_decode: bool = False) -> Plan:
    num_prefill, decode_stride, decode_cap, prefill_stride, prefill_cap, lens = _common(
        num_tokens, num_decode_tokens, global_decode_buffer, decode_lens_buffer, prefill_buffer)
    width = _active_width(max_compressed_tokens, decode_cap, prefill_cap)
    decode_rows = global_decode_buffer.as_strided((num_decode_tokens, width), (decode_stride, 1))
    prefill_rows = prefill_buffer.as_strided((num_prefill, width), (prefill_stride, 1))
    decode_out = (
        global_decode_buffer.as_strided((num_decode_tokens, decode_cap), (decode_stride, 1))
        if full_width_decode else decode_rows
    )
    return Plan(PREFIX, num_decode_tokens, num_prefill, width, width, decode_stride,
                prefill_stride, decode_rows, prefill_rows, decode_out, lens)


def _plan_packed(num_tokens: int, num_decode_tokens: int, global_decode_buffer: torch.Tensor,
                 decode_lens_buffer: torch.Tensor, prefill_buffer: torch.Tensor,
                 max_compressed_tokens: int, full_width_decode: bool = False) -> Plan:
    num_prefill, _, decode_cap, _, prefill_cap, lens = _common(
        num_tokens, num_decode_tokens, global_decode_buffer, decode_lens_buffer, prefill_buffer)
    width = _active_width(max_compressed_tokens, decode_cap, prefill_cap)
    decode_rows = _packed_rows(global_decode_buffer, num_decode_tokens, width)
    prefill_rows = _packed_rows(prefill_buffer, num_prefill, width)
    return Plan(PACKED, num_decode_tokens, num_prefill, width, width, width, width, decode_rows,
                prefill_rows, decode_rows, lens)


#: A planner: (num_tokens, num_decode_tokens, global_decode_buffer, decode_lens_buffer,
#: prefill_buffer, max_compressed_tokens, full_width_decode) -> Plan.
Planner = Callable[[int, int, torch.Tensor, torch.Tensor, torch.Tensor, int, bool], Plan]

_PLANNERS: dict[str, Planner] = {
    CAPACITY: _plan_capacity,
    PREFIX: _plan_prefix,
    PACKED: _plan_packed,
}
