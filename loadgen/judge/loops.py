"""Loops: text that ends by going round in circles (`reasoning_loop`, `tool_args_loop`).

Two detectors over the tail of a text: an exact repeating period of characters (a unit
of `loop_min_period_chars`..`loop_max_period_chars` repeated at least `loop_min_repeats`
times over at least `loop_min_chars`), and a word n-gram (`ngram_words` words) seen at
least `ngram_min_repeats` times in the last `ngram_tail_words` words. A period of one
token ("0000...") is caught too: it also repeats with any multiple of its length.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig


@dataclass(frozen=True, slots=True)
class Loop:
    """Where a loop was found, for the report's forensics."""

    field: str
    kind: str  # "period" or "ngram"
    unit: str
    repeats: int


def tail_period_loop(
    text: str, min_period: int, max_period: int, min_repeats: int, min_chars: int
) -> tuple[str, int] | None:
    """Shortest unit that the text's tail repeats, as (unit, repeats), or None.

    Candidates come from earlier occurrences of the last `min_period` characters (found
    with str.rfind, i.e. C speed), so a healthy text costs a few scans, not a
    quadratic search.
    """
    n = len(text)
    if n < max(min_chars, min_period * min_repeats):
        return None
    probe = text[n - min_period:]
    lo = max(0, n - min_period - max_period)
    hi = n - 1
    while True:
        i = text.rfind(probe, lo, hi)
        if i < 0:
            return None
        period = n - min_period - i
        hi = i + min_period - 1
        if period < min_period:
            continue
        unit = text[n - period:]
        start = n - period
        repeats = 1
        while start - period >= 0 and text[start - period:start] == unit:
            start -= period
            repeats += 1
        if repeats >= min_repeats and repeats * period >= min_chars:
            return unit, repeats


def ngram_loop(text: str, n: int, min_repeats: int, tail_words: int,
               templates: bool = False) -> tuple[str, int] | None:
    """The most repeated word n-gram in the tail, if it repeats at least min_repeats.

    `templates`: the text may legitimately fill one template many times (an answer's
    list, table, code or JSON). What lies between consecutive occurrences then tells a
    loop from a template: a loop returns through the same few words, a template gets a
    new value each time (an account id, a row's numbers), so at most half of those
    in-between spans may be distinct. Reasoning is not held to that: a reasoning that
    keeps restating itself with a counter that grows is a loop.
    """
    words = text.split()
    if len(words) < n * min_repeats:
        return None
    words = words[-tail_words:]
    counts = Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    gram, repeats = counts.most_common(1)[0]
    if repeats < min_repeats:
        return None
    if not templates:
        return " ".join(gram), repeats
    starts = [i for i in range(len(words) - n + 1) if tuple(words[i:i + n]) == gram]
    spans = [tuple(words[a + n:b]) for a, b in itertools.pairwise(starts)]
    if len(set(spans)) > len(spans) // 2:
        return None
    return " ".join(gram), repeats


def text_loop(text: str, cfg: VerdictConfig, templates: bool) -> tuple[str, str, int] | None:
    """(kind, unit, repeats) when the text ends in a loop: a repeated period of
    characters, else a repeated word n-gram (`templates`: see `ngram_loop`)."""
    hit = tail_period_loop(text, cfg.loop_min_period_chars, cfg.loop_max_period_chars,
                           cfg.loop_min_repeats, cfg.loop_min_chars)
    if hit:
        return "period", hit[0], hit[1]
    hit = ngram_loop(text, cfg.ngram_words, cfg.ngram_min_repeats, cfg.ngram_tail_words,
                     templates=templates)
    if hit:
        return "ngram", hit[0], hit[1]
    return None


def find_loop(record: RequestRecord, cfg: VerdictConfig) -> Loop | None:
    for field in ("reasoning", "content"):
        text = getattr(record, field)
        if text:
            hit = text_loop(text, cfg, templates=field == "content")
            if hit:
                return Loop(field, *hit)
    return None


