"""Builder functions with upstream's exact ``build_c128a_topk_metadata`` signature.

vLLM's metadata builder calls the module global by name with positional
arguments plus ``max_compressed_tokens=``; a replacement therefore has to be a
drop-in with the same parameters, defaults and return triple
(``signature.C128ABuilder``; a test holds each builder to it). One function is
made per (layout, impl) and cached, so installing the "same" builder twice
installs the same object (the plugin's idempotency relies on that).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from types import ModuleType

import torch

from server_patch.c128a import layouts, reference
from server_patch.c128a.signature import DEFAULT_MAX_COMPRESSED_TOKENS, C128ABuilder, Outputs

logger = logging.getLogger(__name__)

Impl = Callable[..., None]

#: How a builder runs: our Triton kernel, the torch reference, or "auto"
#: (Triton for CUDA tensors, the torch reference for CPU tensors).
IMPLS: tuple[str, ...] = ("auto", "triton", "torch")


def _kernel_module() -> ModuleType:
    # Imported on demand: the sim and the tests use the builder where triton
    # is not installed.
    from server_patch.c128a import kernel

    return kernel


@functools.lru_cache(maxsize=1)
def _auto_cuda_impl() -> Impl:
    try:
        return _kernel_module().build
    except ImportError:
        logger.warning("dsv4-qual: triton is not importable; CUDA builds use the torch reference")
        return reference.build


def _resolve_impl(impl: str) -> Callable[[torch.Tensor], Impl]:
    if impl == "torch":
        return lambda positions: reference.build
    if impl == "triton":
        kernel_build = _kernel_module().build  # fail now, not on the first forward
        return lambda positions: kernel_build
    return lambda positions: _auto_cuda_impl() if positions.is_cuda else reference.build


def builder(layout: str, *, impl: str = "auto") -> C128ABuilder:
    """Return the ``build_c128a_topk_metadata`` replacement for a layout.

    The returned function carries ``layout`` and ``impl`` attributes and a
    qualified name that says which layout it writes, so a receipt or a log line
    can name exactly what is installed. The same (layout, impl) always returns
    the same object.
    """
    if layout not in layouts.LAYOUTS:
        raise ValueError(
            f"unknown C128A layout {layout!r}; expected one of {', '.join(layouts.LAYOUTS)}"
        )
    if impl not in IMPLS:
        raise ValueError(f"unknown C128A impl {impl!r}; expected one of {', '.join(IMPLS)}")
    return _make_builder(layout, impl)


@functools.cache
def _make_builder(layout: str, impl: str) -> C128ABuilder:
    pick_impl = _resolve_impl(impl)
    plan_rows = layouts.planner(layout)
    is_prefix = layout == layouts.PREFIX

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
    ) -> Outputs:
        # Runs on the host before every decode step's graph replay: positional calls,
        # one plan, one launch (see kernel.py and launcher.py for the launch side).
        plan = plan_rows(
            positions.shape[0],
            num_decode_tokens,
            global_decode_buffer,
            decode_lens_buffer,
            prefill_buffer,
            max_compressed_tokens,
            is_prefix and layouts.needs_contiguous_decode(global_decode_buffer.device),
        )
        pick_impl(positions)(
            plan,
            positions,
            compress_ratio,
            token_to_req_indices,
            block_table,
            block_size,
            slot_mapping,
        )
        return plan.decode_out, plan.decode_lens, plan.prefill_rows

    suffix = layout if impl == "auto" else f"{layout},{impl}"
    build_c128a_topk_metadata.__qualname__ = f"build_c128a_topk_metadata[{suffix}]"
    build_c128a_topk_metadata.__module__ = "server_patch.c128a"
    build_c128a_topk_metadata.layout = layout  # type: ignore[attr-defined]
    build_c128a_topk_metadata.impl = impl  # type: ignore[attr-defined]
    return build_c128a_topk_metadata


def qualified_name(fn: Callable[..., object]) -> str:
    """``module.qualname`` of a function, as receipts and log lines name it."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
