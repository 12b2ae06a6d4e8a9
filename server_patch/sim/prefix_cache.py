"""Automatic prefix caching, as vLLM's V1 engine does it: whole KV blocks, found by hash.

A prompt's full blocks are hashed in a chain (a block's hash covers its parent's hash
and its own tokens), so a block is found only under the very prefix that wrote it. A
request whose first blocks are cached takes them as they are (shared with every other
holder: its KV is the same) and prefills only the rest. vLLM keeps at least the last
token to compute, so a whole-prompt hit still prefills one block. A freed block stays
cached until the pool hands it out for new content.

The counters are vLLM's: `vllm:prefix_cache_queries_total` (prompt tokens looked up)
and `vllm:prefix_cache_hits_total` (of those, tokens found cached).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


class PrefixCache:
    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._by_hash: dict[bytes, int] = {}
        self._hash_of: dict[int, bytes] = {}

    def hashes(self, tokens: Sequence[str]) -> list[bytes]:
        """The chain of hashes of a prompt's full blocks."""
        out: list[bytes] = []
        parent = b""
        size = self.block_size
        for start in range(0, len(tokens) - size + 1, size):
            h = hashlib.blake2b(parent, digest_size=16)
            h.update("\x1f".join(tokens[start:start + size]).encode())
            parent = h.digest()
            out.append(parent)
        return out

    def lookup(self, hashes: Sequence[bytes], prompt_tokens: int) -> list[int]:
        """The cached blocks of the longest cached prefix, leaving a token to compute."""
        limit = (prompt_tokens - 1) // self.block_size
        found: list[int] = []
        for h in hashes[:limit]:
            block = self._by_hash.get(h)
            if block is None:
                break
            found.append(block)
        return found

    def register(self, hashes: Sequence[bytes], blocks: Sequence[int]) -> None:
        """A prefilled prompt's full blocks, findable from now on (a hash already
        cached keeps its block)."""
        for h, block in zip(hashes, blocks, strict=False):
            if h not in self._by_hash and block not in self._hash_of:
                self._by_hash[h] = block
                self._hash_of[block] = h

    def is_cached(self, block: int) -> bool:
        return block in self._hash_of

    def evict(self, block: int) -> None:
        """The block is handed out for new content: its cached prefix is gone."""
        h = self._hash_of.pop(block, None)
        if h is not None and self._by_hash.get(h) == block:
            del self._by_hash[h]
