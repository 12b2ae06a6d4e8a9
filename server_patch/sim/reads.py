"""What a metadata row's attention actually read, entry by entry.

A row should read exactly its request's compressed entries 0..e-1, entry j at column j.
A wrong read finds one of two different things, and the toy model cares which:

- **missing** context: a slot that holds nothing (an unwritten or padded slot, the null
  block, an id outside the pool), or an entry the row should have read and did not.
  Sparse attention then sees less of the request's own context;
- **foreign** context: an entry another request wrote (still running, or finished and
  its block not yet overwritten). Attention then mixes another conversation in.

(An entry of the request's own at the wrong column is neither: still its own context.)
Any deviation at all makes the row *misread*: what the sim's counters and tests see.
Whether the model is lost depends only on the row's foreign share (`model.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from server_patch.sim.kv import entry_owner, entry_value


@dataclass(frozen=True)
class RowReads:
    """Per row (one decode or prefill token): how its read went."""

    misread: torch.Tensor  # bool: anything but exactly its own entries 0..e-1
    foreign: torch.Tensor  # int: entries read that another request wrote
    missing: torch.Tensor  # int: entries it should have read and got nothing for
    read: torch.Tensor  # int: entries it read (columns below its length)

    @property
    def foreign_share(self) -> torch.Tensor:
        """The share of what the row read that is another request's KV (0 if nothing)."""
        return self.foreign.to(torch.float64) / self.read.clamp(min=1).to(torch.float64)

    def fatal(self, threshold: float) -> torch.Tensor:
        """Rows whose foreign share passes `threshold` (never, at 1.0)."""
        return self.foreign_share > threshold


def judge(got: torch.Tensor, read_len: torch.Tensor, owners: torch.Tensor,
          expected: torch.Tensor) -> RowReads:
    """Judge rows from the pool values they read.

    `got` (rows, width): the pool value behind each column the row's consumer read;
    `read_len` (rows,): how many leading columns it read (the decode length it was
    given, or a prefill token's causal count); `owners` (rows,): the uid of each row's
    request; `expected` (rows,): how many entries the row should read.
    """
    width = got.shape[1]
    cols = torch.arange(width, device=got.device).unsqueeze(0)
    read = cols < read_len.unsqueeze(1)
    should = cols < expected.unsqueeze(1)
    right = read & should & (got == entry_value(owners.unsqueeze(1), cols))
    owner = entry_owner(got)
    foreign = read & (owner > 0) & (owner != owners.unsqueeze(1))
    # Expected entries past the width were not read at all: missing too.
    unread = (expected - width).clamp(min=0)
    missing = (should & (~read | (got <= 0))).sum(dim=1) + unread
    misread = (read & ~right).any(dim=1) | (should & ~read).any(dim=1) | (unread > 0)
    return RowReads(misread=misread, foreign=foreign.sum(dim=1), missing=missing,
                    read=read.sum(dim=1))

