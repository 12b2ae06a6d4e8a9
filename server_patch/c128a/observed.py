"""Report what a builder actually did on its first call.

A receipt that only says "patched" proves little: the proof that a server runs
the capacity-stride contract is the row stride, width and buffer shapes the
builder used on a real batch. This wrapper captures them once per process and
hands them to a callback (the plugin writes them into the receipt; the sim can
do the same). After the first call it costs one flag test per call.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import torch

from server_patch.c128a import layouts
from server_patch.c128a.builders import DEFAULT_MAX_COMPRESSED_TOKENS, BuilderFn

logger = logging.getLogger(__name__)


def _impl_used(impl: str, positions: torch.Tensor) -> str:
    if impl != "auto":
        return impl
    return "triton" if positions.is_cuda else "torch"


def describe_call(
    fn: BuilderFn,
    positions: torch.Tensor,
    num_decode_tokens: int,
    global_decode_buffer: torch.Tensor,
    prefill_buffer: torch.Tensor,
    returned: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
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
    fn: BuilderFn, on_first_call: Callable[[dict[str, Any]], None]
) -> BuilderFn:
    """Wrap ``fn`` so ``on_first_call`` gets ``describe_call``'s dict once.

    The callback runs after the build and can never break it: its exceptions
    are logged, not raised, because this runs inside the model's forward path.
    """
    pending = True

    @functools.wraps(fn)
    def build_c128a_topk_metadata(
        positions: torch.Tensor,
        compress_ratio: int,
        num_decode_tokens: int,
        token_to_req_indices: torch.Tensor,
        block_table: torch.Tensor,
        block_size: int,
        slot_mapping: torch.Tensor,
        global_decode_buffer: torch.Tensor,
        decode_lens_buffer: torch.Tensor,
        prefill_buffer: torch.Tensor,
        max_compressed_tokens: int = DEFAULT_MAX_COMPRESSED_TOKENS,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        nonlocal pending
        returned = fn(
            positions,
            compress_ratio,
            num_decode_tokens,
            token_to_req_indices,
            block_table,
            block_size,
            slot_mapping,
            global_decode_buffer,
            decode_lens_buffer,
            prefill_buffer,
            max_compressed_tokens,
        )
        if pending:
            pending = False
            try:
                on_first_call(
                    describe_call(
                        fn,
                        positions,
                        num_decode_tokens,
                        global_decode_buffer,
                        prefill_buffer,
                        returned,
                        max_compressed_tokens,
                    )
                )
            except Exception:
                logger.exception("dsv4-qual: could not record the C128A builder's first call")
        return returned

    return build_c128a_topk_metadata
