"""Honest texts cut into deltas the way a token stream cuts them.

A tokenizer of the byte-pair kind attaches a leading space to the word after it, keeps
punctuation, newlines and runs of spaces or of one symbol as tokens of their own; a
server with speculative decoding sends one to a few tokens a delta. `deltas` cuts a
text that way (`per_delta`: the most tokens a delta holds, drawn per delta), so honest
replies of the legit corpus become honest streams with the repeats such streams have.
"""

from __future__ import annotations

import random

import regex

_TOKEN = regex.compile(r" ?\p{L}+| ?\p{N}{1,3}|\n+| +(?=\S)| +|([^\s\p{L}\p{N}])\1{0,15}"
                       r"|[^\s\p{L}\p{N}]|\s", regex.S)


def tokens(text: str) -> list[str]:
    """The text as tokens (joined, they give it back)."""
    out = [m.group(0) for m in _TOKEN.finditer(text)]
    assert "".join(out) == text
    return out


def deltas(text: str, rng: random.Random | None = None, per_delta: int = 1) -> list[str]:
    """The text as the deltas of a stream: one token each, or 1 to `per_delta` drawn
    per delta (speculative decoding accepting a few tokens a step)."""
    toks = tokens(text)
    if per_delta <= 1 or rng is None:
        return toks
    out: list[str] = []
    i = 0
    while i < len(toks):
        n = rng.randint(1, per_delta)
        out.append("".join(toks[i:i + n]))
        i += n
    return out
