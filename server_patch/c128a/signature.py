"""Upstream's ``build_c128a_topk_metadata`` contract, declared once.

vLLM (0.26.0 - 0.34.x) calls the module global by name with ten positional
arguments and ``max_compressed_tokens=``; every function we put in its place
(our builders in each layout, the first-call observer, the stride guard) must
accept exactly that. ``C128ABuilder`` is that contract as a type;
``PARAMETERS`` and the default are read off it, and ``call_through`` is the one
wrapper that runs a builder and then hands its arguments, by name, to a hook.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Protocol

import torch

DEFAULT_MAX_COMPRESSED_TOKENS = 8192

#: What a builder returns: (decode rows, decode lengths, prefill rows), views of the
#: persistent buffers.
Outputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class C128ABuilder(Protocol):
    """A drop-in for vLLM's ``build_c128a_topk_metadata``."""

    def __call__(
        self,
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
    ) -> Outputs: ...


_PROTOCOL = inspect.signature(C128ABuilder.__call__)
#: The signature every builder has (``self`` dropped).
SIGNATURE = _PROTOCOL.replace(parameters=list(_PROTOCOL.parameters.values())[1:])
#: Upstream's parameter names, in order.
PARAMETERS: tuple[str, ...] = tuple(SIGNATURE.parameters)


def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """One call's arguments by name, as vLLM passes them (positional, then keywords)."""
    named = dict(zip(PARAMETERS, args, strict=False))
    if kwargs:
        named.update(kwargs)
    named.setdefault("max_compressed_tokens", DEFAULT_MAX_COMPRESSED_TOKENS)
    return named


#: What the stride guard and the first-call observer read of a call: positions,
#: num_decode_tokens, global_decode_buffer, prefill_buffer, max_compressed_tokens.
_WATCHED = ("positions", "num_decode_tokens", "global_decode_buffer", "prefill_buffer")
_POSITIONS, _DECODES, _DECODE_BUFFER, _PREFILL_BUFFER = (PARAMETERS.index(n) for n in _WATCHED)
_WIDTH_AT = PARAMETERS.index("max_compressed_tokens")


def watched_inputs(args: tuple[Any, ...], kwargs: dict[str, Any]
                   ) -> tuple[Any, Any, Any, Any, Any]:
    """(positions, num_decode_tokens, global_decode_buffer, prefill_buffer,
    max_compressed_tokens) of one call.

    The guard runs on every decode step, so the usual call (ten positional
    arguments and ``max_compressed_tokens=``) is read by index, ~0.1 us; any other
    shape of call is bound by name.
    """
    if len(args) >= _WIDTH_AT and (not kwargs or kwargs.keys() == {"max_compressed_tokens"}):
        width = args[_WIDTH_AT] if len(args) > _WIDTH_AT else kwargs.get(
            "max_compressed_tokens", DEFAULT_MAX_COMPRESSED_TOKENS)
        return (args[_POSITIONS], args[_DECODES], args[_DECODE_BUFFER], args[_PREFILL_BUFFER],
                width)
    call = arguments(args, kwargs)
    positions, decodes, decode_buffer, prefill_buffer = (call[name] for name in _WATCHED)
    return positions, decodes, decode_buffer, prefill_buffer, call["max_compressed_tokens"]


def call_through(fn: C128ABuilder, after: Callable[[tuple[Any, ...], dict[str, Any], Outputs],
                                                    None]) -> C128ABuilder:
    """``fn`` with ``after(args, kwargs, returned)`` run after each call.

    The wrapper keeps ``fn``'s name, attributes and signature (``functools.wraps``:
    ``inspect.signature`` follows ``__wrapped__``), so a receipt or a log line names
    the builder it wraps and a signature check sees upstream's parameters. The hook
    gets the raw arguments and reads them (``watched_inputs``, ``arguments``) only
    when it needs them.
    """

    @functools.wraps(fn)
    def build_c128a_topk_metadata(*args: Any, **kwargs: Any) -> Outputs:
        returned = fn(*args, **kwargs)
        after(args, kwargs, returned)
        return returned

    return build_c128a_topk_metadata
