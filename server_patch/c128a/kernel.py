"""Triton kernel for the C128A builder.

Design, and why:

- Grid ``(tokens, cdiv(width, BLOCK))``: one program per (token, column block),
  so the work, and the time, scale with the *active* width, not with the buffer
  capacity. ``prefix`` and ``packed`` then do the same work and differ only in
  the row stride; ``capacity`` writes every column of the capacity.
- The decode length is ``clamp(num_compressed, 0, width)`` in closed form, so no
  program has to loop over a row to count it; column block 0 stores it.
- Every runtime scalar (strides, widths, token counts, ratio, block size) is in
  ``do_not_specialize``: Triton would otherwise specialize integers on
  ``== 1`` and divisibility by 16 and compile a new variant when, say, the
  active width or the number of decode tokens changes. A long-running server
  must never recompile (a JIT stall on one tensor-parallel rank wedges the
  engine). ``BLOCK`` is the only compile-time constant.
- Every pointer is in ``do_not_specialize_on_alignment``: a view that starts off a
  16-byte boundary must not select another variant either. No store here can be
  vectorized anyway (the row stride is a runtime value), so nothing is lost.
- So the one variant depends only on the dtypes, and ``launcher.CachedLauncher`` can
  keep the compiled kernel and launch it without Triton's per-call binding and
  specialization (the host time every decode step pays).
- Pointer offsets are widened to int64 before multiplying by a row stride.

Only features present in both Triton 3.6 and 3.9 are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import triton
import triton.language as tl

from server_patch.c128a.launcher import CachedLauncher

if TYPE_CHECKING:
    from server_patch.c128a.layouts import Plan

#: Columns per program. 512 int32 = 2 KiB per program; 4 warps give each
#: thread four consecutive elements.
BLOCK = 512
NUM_WARPS = 4

#: Every non-pointer runtime argument. Kept next to the kernel; a test checks
#: that it names all of the kernel's scalar parameters.
DO_NOT_SPECIALIZE = (
    "decode_row_stride",
    "decode_width",
    "prefill_row_stride",
    "prefill_width",
    "compress_ratio",
    "num_decode_tokens",
    "block_table_stride",
    "block_size",
)

#: Every pointer argument: the variant must not depend on where a view starts.
DO_NOT_SPECIALIZE_ON_ALIGNMENT = (
    "decode_ptr",
    "decode_lens_ptr",
    "prefill_ptr",
    "positions_ptr",
    "token_to_req_ptr",
    "block_table_ptr",
    "slot_mapping_ptr",
)


def _c128a_metadata_kernel(
    decode_ptr,
    decode_row_stride,
    decode_width,
    decode_lens_ptr,
    prefill_ptr,
    prefill_row_stride,
    prefill_width,
    positions_ptr,
    compress_ratio,
    num_decode_tokens,
    token_to_req_ptr,
    block_table_ptr,
    block_table_stride,
    block_size,
    slot_mapping_ptr,
    BLOCK: tl.constexpr,
):
    token = tl.program_id(0)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK + tl.arange(0, BLOCK)
    position = tl.load(positions_ptr + token)
    num_compressed = (position + 1) // compress_ratio

    if token < num_decode_tokens:
        num_valid = tl.maximum(tl.minimum(num_compressed, decode_width), 0)
        valid = cols < num_valid
        req = tl.load(token_to_req_ptr + token).to(tl.int64)
        blocks = tl.load(
            block_table_ptr + req * block_table_stride + cols // block_size,
            mask=valid,
            other=0,
        )
        slots = tl.where(valid, blocks * block_size + cols % block_size, -1)
        row = decode_ptr + token.to(tl.int64) * decode_row_stride
        tl.store(row + cols, slots, mask=cols < decode_width)
        if col_block == 0:
            token_ok = tl.load(slot_mapping_ptr + token) >= 0
            tl.store(decode_lens_ptr + token, tl.where(token_ok, num_valid, 0).to(tl.int32))
    else:
        num_valid = tl.maximum(tl.minimum(num_compressed, prefill_width), 0)
        local = tl.where(cols < num_valid, cols, -1)
        row = prefill_ptr + (token - num_decode_tokens).to(tl.int64) * prefill_row_stride
        tl.store(row + cols, local, mask=cols < prefill_width)


c128a_metadata_kernel = triton.jit(
    do_not_specialize=DO_NOT_SPECIALIZE,
    do_not_specialize_on_alignment=DO_NOT_SPECIALIZE_ON_ALIGNMENT,
)(_c128a_metadata_kernel)

_PARAMETERS = tuple(c128a_metadata_kernel.arg_names)
#: The kernel's launcher (benchmarks switch its lean path off to show what it saves).
LAUNCHER = CachedLauncher(
    c128a_metadata_kernel,
    tensor_positions=[_PARAMETERS.index(name) for name in DO_NOT_SPECIALIZE_ON_ALIGNMENT],
    int_positions=[_PARAMETERS.index(name) for name in DO_NOT_SPECIALIZE],
    options={"BLOCK": BLOCK, "num_warps": NUM_WARPS},
)


def is_interpreted() -> bool:
    """Whether the kernel was built for Triton's CPU interpreter (TRITON_INTERPRET=1)."""
    return type(c128a_metadata_kernel).__name__ == "InterpretedFunction"


def build(
    plan: Plan,
    positions: torch.Tensor,
    compress_ratio: int,
    token_to_req_indices: torch.Tensor,
    block_table: torch.Tensor,
    block_size: int,
    slot_mapping: torch.Tensor,
) -> None:
    """Launch the kernel over the plan's rows (one launch for decode and prefill)."""
    num_tokens = plan.num_decode_tokens + plan.num_prefill_tokens
    if num_tokens == 0:
        return
    if not positions.is_cuda and not is_interpreted():
        raise RuntimeError(
            "dsv4-qual: the Triton C128A kernel got CPU tensors; set TRITON_INTERPRET=1 "
            "before triton is imported, or use impl='torch'"
        )
    width = plan.decode_width if plan.decode_width > plan.prefill_width else plan.prefill_width
    LAUNCHER.launch(
        num_tokens,
        -(-width // BLOCK),
        plan.decode_rows,
        plan.decode_row_stride,
        plan.decode_width,
        plan.decode_lens,
        plan.prefill_rows,
        plan.prefill_row_stride,
        plan.prefill_width,
        positions,
        compress_ratio,
        plan.num_decode_tokens,
        token_to_req_indices,
        block_table,
        block_table.stride(0),
        block_size,
        slot_mapping,
    )


def warm_up() -> Any:
    """Compile the kernel's one variant for the current CUDA device, launching nothing.

    What upstream's JIT-warmup object does for its kernel (vLLM 0.30+): the first
    decode step then never waits for a compile. Returns Triton's compiled kernel.
    """
    i32, i64 = torch.int32, torch.int64
    # Tensors by dtype (Triton stands a mock in), runtime integers by any small value:
    # neither selects a variant beyond their type.
    return c128a_metadata_kernel.warmup(
        i32, 1, 1, i32, i32, 1, 1, i64, 128, 1, i32, i32, 1, 2, i64,
        grid=(1, 1), BLOCK=BLOCK, num_warps=NUM_WARPS,
    )


def compiled_variant_count() -> int:
    """How many compiled variants of the kernel exist in this process.

    Reads Triton's per-device kernel cache (``device_caches[device][0]`` in
    Triton 3.x); used by the GPU test that proves shapes never recompile.
    """
    caches = getattr(c128a_metadata_kernel, "device_caches", None)
    if caches is not None:
        return sum(len(entry[0]) for entry in caches.values())
    legacy = getattr(c128a_metadata_kernel, "cache", {})
    return sum(len(per_device) for per_device in legacy.values())

