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
What the model makes of a row depends only on its foreign share (`faces.py`) and on
whose KV it read: the *dominant foreign owner*, the request that wrote most of the
foreign entries the row read (the lowest uid among equals), and how many of them.

Everything here is plain tensor arithmetic (comparisons, sums, a sort of values, a
running maximum, min/max reductions) whose result does not depend on the device: no
reduction order, no tie broken by position, no sort stability is relied on, so a CUDA
run judges every row as a CPU run does.
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
    foreign_owner: torch.Tensor  # int: the uid that wrote most of its foreign entries (0: none)
    owner_entries: torch.Tensor  # int: how many of that owner's entries it read

    @property
    def foreign_share(self) -> torch.Tensor:
        """The share of what the row read that is another request's KV (0 if nothing)."""
        return self.foreign.to(torch.float64) / self.read.clamp(min=1).to(torch.float64)

    def most_foreign(self) -> int:
        """The first row with the largest foreign share (a request's worst prefill row)."""
        share = self.foreign_share
        return int((share == share.max()).nonzero()[0, 0])


def dominant_owner(owners: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of `owners` (a uid per entry, 0 where the entry is not foreign): the uid
    with the most entries (the lowest among equals; 0 for a row with none) and its count.

    Sorting a row's values puts each uid's entries in one run; a run's length is read
    off a running maximum of run starts. Only sorted values are used, never indices.
    """
    rows, width = owners.shape
    if width == 0:
        zero = torch.zeros(rows, dtype=torch.int64, device=owners.device)
        return zero, zero.clone()
    ordered = owners.sort(dim=1).values
    cols = torch.arange(width, device=owners.device).expand(rows, width)
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    run_start = torch.where(starts, cols, 0).cummax(dim=1).values
    run_len = torch.where(ordered > 0, cols - run_start + 1, 0)
    count = run_len.max(dim=1).values
    at_max = (run_len == count.unsqueeze(1)) & (count.unsqueeze(1) > 0)
    biggest = torch.iinfo(ordered.dtype).max
    uid = torch.where(at_max, ordered, biggest).min(dim=1).values
    return torch.where(count > 0, uid, 0), count


def _owners_of_foreign_rows(foreign: torch.Tensor, owner: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """`dominant_owner` of the rows that read anything foreign, 0 for the others: most
    rows (a prompt's thousands of prefill rows) read none, and need no sort."""
    uid = torch.zeros(foreign.shape[0], dtype=torch.int64, device=foreign.device)
    count = torch.zeros_like(uid)
    rows = foreign.any(dim=1).nonzero().squeeze(1)
    if rows.numel():
        uid[rows], count[rows] = dominant_owner(torch.where(foreign[rows], owner[rows], 0))
    return uid, count


def judge(got: torch.Tensor, read_len: torch.Tensor, owners: torch.Tensor,
          expected: torch.Tensor, right_values: torch.Tensor | None = None,
          shared: torch.Tensor | None = None) -> RowReads:
    """Judge rows from the pool values they read.

    `got` (rows, width): the pool value behind each column the row's consumer read;
    `read_len` (rows,): how many leading columns it read (the decode length it was
    given, or a prefill token's causal count); `owners` (rows,): the uid of each row's
    request; `expected` (rows,): how many entries the row should read.

    With a prefix cache, a request's first blocks may be a cached prefix another
    request wrote: `right_values` (rows, width) is then what each column should read
    (the entry in the request's own block for it, whoever wrote it), and `shared`
    (rows, width) marks reads of a block the row's request holds through the cache,
    which are its own context whoever wrote them. Without them, a column's right entry
    is the request's own.
    """
    width = got.shape[1]
    cols = torch.arange(width, device=got.device).unsqueeze(0)
    read = cols < read_len.unsqueeze(1)
    should = cols < expected.unsqueeze(1)
    right_value = entry_value(owners.unsqueeze(1), cols) if right_values is None \
        else right_values
    right = read & should & (got == right_value)
    owner = entry_owner(got)
    foreign = read & (owner > 0) & (owner != owners.unsqueeze(1))
    if shared is not None:
        foreign &= ~shared
    foreign_owner, owner_entries = _owners_of_foreign_rows(foreign, owner)
    # Expected entries past the width were not read at all: missing too.
    unread = (expected - width).clamp(min=0)
    missing = (should & (~read | (got <= 0))).sum(dim=1) + unread
    misread = (read & ~right).any(dim=1) | (should & ~read).any(dim=1) | (unread > 0)
    return RowReads(misread=misread, foreign=foreign.sum(dim=1), missing=missing,
                    read=read.sum(dim=1), foreign_owner=foreign_owner,
                    owner_entries=owner_entries)

