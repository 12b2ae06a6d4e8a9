"""Token salad: what a model writes for a while when some of what it attends to is noise.

Real servers with this bug class have written bursts of `<｜begin▁of▁sentence｜>` and
multilingual sub-word soup in the middle of an otherwise fine reply. The sim's salad is
spelled from what the row read: the foreign request's uid and how many of its entries
were read pick the fragments (sub-words of several scripts, interleaved token by token,
and pieces of the foreign request's own words), so the same read writes the same salad
and nothing is random.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

BOS = "<｜begin▁of▁sentence｜>"
#: Sub-word fragments by script, as a multilingual tokenizer's vocabulary holds them.
FRAGMENTS: tuple[tuple[str, ...], ...] = (
    ("ции", "ств", "ого", "при", "ени", "ных", "ль", "ова"),  # Cyrillic
    ("的", "用户", "账", "户", "计", "划", "取消", "们"),  # Han
    ("ال", "ية", "مت", "ون", "حس", "اب"),  # Arabic
    ("के", "कर", "ने", "ता", "में", "प्र"),  # Devanagari
    ("τη", "ου", "κα", "ση", "πο"),  # Greek
    ("니다", "계", "정", "을", "하"),  # Hangul
    ("การ", "ที่", "ของ", "ใน"),  # Thai
)
SALAD_MIN_TOKENS = 12
SALAD_MAX_TOKENS = 32
BOS_BURST = 4


def salad_length(entries: int) -> int:
    """Tokens of salad for a read of `entries` foreign entries: more read, longer."""
    return min(SALAD_MAX_TOKENS, SALAD_MIN_TOKENS + max(entries, 0))


def token_salad(owner: int, entries: int, words: Sequence[str]) -> list[str]:
    """The salad a read of `entries` entries of request `owner` writes, one token each:
    a burst of BOS, then sub-words of the scripts in turn, every third one a piece of
    one of the owner's `words` (Latin, when it has any)."""
    n = salad_length(entries)
    digest = hashlib.blake2b(f"{owner}/{entries}".encode(), digest_size=64).digest()
    burst_at = digest[0] % (n - BOS_BURST + 1)
    tokens: list[str] = []
    for k in range(n - BOS_BURST):
        byte = digest[1 + k]
        if k % 3 == 2 and words:
            word = words[byte % len(words)]
            start = (byte >> 4) % max(len(word) - 2, 1)
            tokens.append(word[start:start + 3])
        else:
            script = FRAGMENTS[(owner + k) % len(FRAGMENTS)]
            tokens.append(script[byte % len(script)])
    return tokens[:burst_at] + [BOS] * BOS_BURST + tokens[burst_at:]
