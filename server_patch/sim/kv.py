"""The paged compressed-KV pool, shared by every request, with recycled blocks.

Like vLLM's, blocks go back to a free list when a request ends and the most recently
freed blocks are handed out first, so a stale metadata row points at slots that now
hold another request's entries: what the packed layout's misplaced reads land on. With
a prefix cache (`prefix_cache.py`), blocks of a cached prefix are shared by every
request that hits it (counted holders), and a freed cached block goes to the far end of
the free list, handed out last: its prefix stays findable as long as the pool allows.
Block 0 is never handed out (vLLM's null block): capture-time dummy rows point there.
A slot never written (the null block's, a fresh block's) reads 0, a slot id outside the
pool (garbage) reads -1: both are "missing" context, not another request's.
"""

from __future__ import annotations

import torch

from server_patch.sim.config import SimConfig
from server_patch.sim.prefix_cache import PrefixCache

# An entry's value names its owner and its index: what a correct read must return.
_INDEX_BITS = 20


def entry_value(uid: int | torch.Tensor, index: int | torch.Tensor) -> int | torch.Tensor:
    return uid * (1 << _INDEX_BITS) + index


def entry_owner(values: torch.Tensor) -> torch.Tensor:
    """The uid of the request that wrote each entry; 0 or less where nothing was."""
    return torch.where(values > 0, values >> _INDEX_BITS, 0)


class KVPool:
    def __init__(self, cfg: SimConfig, device: torch.device) -> None:
        self.cfg = cfg
        self.per_block = cfg.compressed_per_block
        self.num_blocks = cfg.num_kv_blocks
        self.entries = torch.zeros(self.num_blocks * self.per_block, dtype=torch.int64,
                                   device=device)
        # LIFO: the last freed block is the next one handed out.
        self.free: list[int] = list(range(self.num_blocks - 1, 0, -1))
        self.cache = PrefixCache(cfg.kv_block_size) if cfg.prefix_caching else None
        self._holders: dict[int, int] = {}  # shared (cached) block -> its holders

    @property
    def usage(self) -> float:
        return 1.0 - len(self.free) / (self.num_blocks - 1)

    def allocate(self, blocks: list[int], tokens: int) -> None:
        """Grow a request's block list to hold `tokens` tokens."""
        need = -(-tokens // self.cfg.kv_block_size)
        while len(blocks) < need:
            if not self.free:
                raise RuntimeError("KV pool exhausted (the sim sizes it to never happen)")
            block = self.free.pop()
            if self.cache is not None:
                self.cache.evict(block)
            blocks.append(block)

    def share(self, cached: list[int]) -> None:
        """Hold cached blocks (a prefix-cache hit): off the free list while held."""
        for block in cached:
            held = self._holders.get(block, 0)
            if held == 0:
                self.free.remove(block)
            self._holders[block] = held + 1

    def release(self, blocks: list[int]) -> None:
        if self.cache is None:
            self.free.extend(blocks)
            blocks.clear()
            return
        freed = []
        for block in blocks:
            held = self._holders.get(block)
            if held is not None and held > 1:
                self._holders[block] = held - 1
                continue
            self._holders.pop(block, None)
            freed.append(block)
        # Cached blocks at the far end (handed out last), the rest on top, as before.
        self.free[:0] = [b for b in reversed(freed) if self.cache.is_cached(b)]
        self.free.extend(b for b in freed if not self.cache.is_cached(b))
        blocks.clear()

    def mark_cached(self, hashes: list[bytes], blocks: list[int]) -> None:
        """A prefilled prompt's full blocks join the cache, held by their writer."""
        if self.cache is None:
            return
        self.cache.register(hashes, blocks)
        for block in blocks[:len(hashes)]:
            self._holders.setdefault(block, 1)

    def write(self, slots: torch.Tensor, values: torch.Tensor) -> None:
        if slots.numel():
            self.entries[slots] = values

    def slots(self, blocks: list[int], entries: range) -> list[int]:
        """Global slots of a request's compressed entries (where a step writes them)."""
        per = self.per_block
        return [blocks[j // per] * per + j % per for j in entries]

    def slots_of(self, blocks: list[int], local: torch.Tensor) -> torch.Tensor:
        """`slots` for the indices a prefill row read, which may be garbage: -1 where an
        index is negative or past the request's blocks."""
        per = self.per_block
        if not blocks:
            return torch.full_like(local, -1)
        table = torch.tensor(blocks, dtype=torch.int64, device=local.device)
        inside = (local >= 0) & (local < len(blocks) * per)
        safe = local.clamp(0, len(blocks) * per - 1)
        return torch.where(inside, table[safe // per] * per + safe % per, -1)

    def owners(self) -> list[int]:
        """The uids whose entries are in the pool now (readable by a misplaced row)."""
        owners = torch.unique(entry_owner(self.entries))
        return [uid for uid in owners.tolist() if uid > 0]

    def read(self, slots: torch.Tensor) -> torch.Tensor:
        """Entries at slots; a slot outside the pool (garbage index) reads as -1."""
        inside = (slots >= 0) & (slots < self.entries.numel())
        return torch.where(inside, self.entries[slots.clamp(0, self.entries.numel() - 1)], -1)
