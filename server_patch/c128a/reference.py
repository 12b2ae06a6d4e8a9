"""Pure-torch implementation of the C128A builder contract.

It writes exactly the regions a ``Plan`` names, the same rows at the same
strides as the Triton kernel, and leaves every other element alone. That is
what lets the embedded reference server reproduce the packed-layout bug on a
CPU: its capture-frozen consumer reads the persistent buffers' memory, not the
returned views.
"""

from __future__ import annotations

import torch

from server_patch.c128a.layouts import Plan


def _num_compressed(positions: torch.Tensor, compress_ratio: int) -> torch.Tensor:
    # Truncating division, as the kernel's integer division does; positions are
    # never below -1 in practice, where floor and trunc agree anyway.
    return torch.div(positions.to(torch.int64) + 1, compress_ratio, rounding_mode="trunc")


def build(
    plan: Plan,
    positions: torch.Tensor,
    compress_ratio: int,
    token_to_req_indices: torch.Tensor,
    block_table: torch.Tensor,
    block_size: int,
    slot_mapping: torch.Tensor,
) -> None:
    """Fill the plan's decode rows, decode lens and prefill rows in place."""
    n_dec, n_pre = plan.num_decode_tokens, plan.num_prefill_tokens
    device = positions.device
    num_compressed = _num_compressed(positions[: n_dec + n_pre], compress_ratio)

    if n_dec:
        width = plan.decode_width
        count = num_compressed[:n_dec].clamp(0, width)
        cols = torch.arange(width, device=device, dtype=torch.int64)
        valid = cols.unsqueeze(0) < count.unsqueeze(1)
        reqs = token_to_req_indices[:n_dec].to(torch.int64)
        # Entries past a request's valid prefix are never looked up by the
        # kernel (masked load); clamp so they cannot index out of the table.
        block_cols = (cols // block_size).clamp(max=max(block_table.shape[1] - 1, 0))
        if block_table.shape[1]:
            blocks = block_table.to(torch.int64)[reqs][:, block_cols]
        else:
            blocks = torch.zeros((n_dec, width), dtype=torch.int64, device=device)
        slots = blocks * block_size + (cols % block_size).unsqueeze(0)
        plan.decode_rows.copy_(torch.where(valid, slots, -1))
        token_ok = slot_mapping[:n_dec] >= 0
        plan.decode_lens.copy_(torch.where(token_ok, count, 0))

    if n_pre:
        width = plan.prefill_width
        count = num_compressed[n_dec:].clamp(0, width)
        cols = torch.arange(width, device=device, dtype=torch.int64)
        local = torch.where(cols.unsqueeze(0) < count.unsqueeze(1), cols.unsqueeze(0), -1)
        plan.prefill_rows.copy_(local)
