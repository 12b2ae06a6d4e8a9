"""Report what a builder actually did on its first call.

A receipt that only says "patched" proves little: the proof that a server runs
the capacity-stride contract is the row stride, width and buffer shapes the
builder used on a real batch. This wrapper captures them once per process and
hands them to a callback (the plugin writes them into the receipt; the sim can
do the same). After the first call it costs one flag test per call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import torch

from server_patch.c128a import layouts
from server_patch.c128a.signature import C128ABuilder, Outputs, call_through, watched_inputs

logger = logging.getLogger(__name__)


def _impl_used(impl: str, positions: torch.Tensor) -> str:
    if impl != "auto":
        return impl
    return "triton" if positions.is_cuda else "torch"


def describe_call(
    fn: C128ABuilder,
    positions: torch.Tensor,
    num_decode_tokens: int,
    global_decode_buffer: torch.Tensor,
    prefill_buffer: torch.Tensor,
    returned: Outputs,
    max_compressed_tokens: int,
) -> dict[str, Any]:
    """The receipt's ``first_call`` section for one call of ``fn``.

    Strides come from the returned views (what a consumer would see); the width
    is the number of columns the builder wrote per row.
    """
    global_decode, _, prefill_local = returned
    layout = getattr(fn, "layout", "unknown")
    if layout == layouts.CAPACITY:
        width = int(global_decode_buffer.shape[1])
    else:
        width = int(max_compressed_tokens)
    return {
        "row_stride_decode": int(global_decode.stride(0)),
        "row_stride_prefill": int(prefill_local.stride(0)),
        "width": width,
        "decode_buffer_shape": list(global_decode_buffer.shape),
        "prefill_buffer_shape": list(prefill_buffer.shape),
        "decode_view_shape": list(global_decode.shape),
        "num_decode_tokens": int(num_decode_tokens),
        "num_prefill_tokens": int(positions.shape[0] - num_decode_tokens),
        "layout": layout,
        "impl": _impl_used(getattr(fn, "impl", "auto"), positions),
        "device": str(positions.device),
        "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }


def observe_first_call(
    fn: C128ABuilder, on_first_call: Callable[[dict[str, Any]], object]
) -> C128ABuilder:
    """Wrap ``fn`` so ``on_first_call`` gets ``describe_call``'s dict once.

    The callback runs after the build and can never break it: its exceptions
    are logged, not raised, because this runs inside the model's forward path.
    """
    pending = True

    def after(args: tuple[Any, ...], kwargs: dict[str, Any], returned: Outputs) -> None:
        nonlocal pending
        if not pending:
            return
        pending = False
        try:
            positions, num_decode_tokens, decode_buffer, prefill_buffer, width = (
                watched_inputs(args, kwargs))
            on_first_call(describe_call(fn, positions, num_decode_tokens, decode_buffer,
                                        prefill_buffer, returned, width))
        except Exception:
            logger.exception("dsv4-qual: could not record the C128A builder's first call")

    return call_through(fn, after)
