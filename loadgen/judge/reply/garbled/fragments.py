"""The `glued_fragments` and `spaced_letters` detectors: words a broken detokeniser
glued together, or letters it spaced apart."""

from __future__ import annotations

import itertools
import re

import numpy as np

from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.garbled.points import TABLE_SIZE, lookup
from loadgen.judge.reply.garbled.words import candidates
from loadgen.judge.text import language
from loadgen.judge.text.scripts import (
    LATIN,
    SCRIPT_ID,
    script_of,
)

ASCII_LETTER = np.zeros(0x100, dtype=bool)
ASCII_LETTER[[*range(0x41, 0x5B), *range(0x61, 0x7B)]] = True
CASED = np.zeros(TABLE_SIZE, dtype=bool)
CASED[[LATIN, SCRIPT_ID["Cyrillic"], SCRIPT_ID["Greek"]]] = True
_GLUED_MIN_DISTINCT = 10
_GLUED_MIN_RUNS = 3
_GLUED_LETTERS_PER_HUMP = 16  # camelCase has a capital every word, glued prose rarely
#: The share of a glued run's letters its everyday words must read (`_reads_as_words`).
_GLUED_EVERYDAY = 0.4
_SPACED_MIN_DISTINCT = 8
#: Letters this distinct (nearly each once) are an alphabet in some order: a keyboard row,
#: a cipher's key, the alphabet backwards; spelled words repeat their letters.
_KEY_ROW = 0.9
_KEY_ROW_LETTERS = 20  # under this, distinct letters are no sign of an alphabet
_WHITESPACE = np.zeros(0x3002, dtype=bool)  # the last entry: any code point past U+3000
_WHITESPACE[[0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x2028, 0x2029, 0x3000]] = True


def runs(mask: np.ndarray, scr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of masked characters of one script."""
    n = len(mask)
    boundary = np.ones(n + 1, dtype=bool)  # between characters i-1 and i
    boundary[1:n] = (scr[1:] != scr[:-1]) | ~mask[1:] | ~mask[:-1]
    return np.flatnonzero(mask & boundary[:n]), np.flatnonzero(mask & boundary[1:]) + 1


def glued(text: str, cased: np.ndarray, starts: np.ndarray, ends: np.ndarray,
           cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    lengths = ends - starts
    long = np.flatnonzero(lengths >= cfg.garbled_glued_run_letters)
    flat = []
    for i in long.tolist():
        run = text[starts[i]:ends[i]]
        humps = sum(1 for a, b in itertools.pairwise(run) if a.islower() and b.isupper())
        if humps * _GLUED_LETTERS_PER_HUMP <= len(run) and run[1:2].islower() \
                and len(set(run.lower())) >= _GLUED_MIN_DISTINCT and _reads_as_words(run):
            flat.append((int(starts[i]), int(ends[i])))
    if not flat:
        return None
    width = cfg.garbled_fragment_window_chars
    letters = np.concatenate(([0], np.cumsum(cased)))
    lo = 0
    for hi in range(len(flat)):
        while lo < hi and flat[hi][1] - flat[lo][0] > width:
            lo += 1
        # A run three times the shortest is three runs' worth (a reply glued whole); two
        # long words side by side (German compounds) are not.
        runs = sum(3 if e - s >= 3 * cfg.garbled_glued_run_letters else 1
                   for s, e in flat[lo:hi + 1])
        glued = sum(e - s for s, e in flat[lo:hi + 1])
        start, end = flat[lo][0], flat[hi][1]
        share = glued / max(1, int(letters[end] - letters[start]))
        if runs >= _GLUED_MIN_RUNS and glued >= cfg.garbled_glued_letters \
                and share >= cfg.garbled_glued_share:
            return (f"{glued} letters glued in {hi - lo + 1} runs of "
                    f"{cfg.garbled_glued_run_letters}+ within {width} chars (threshold "
                    f"{cfg.garbled_glued_letters}), {share:.0%} of the letters there "
                    f"(threshold {cfg.garbled_glued_share:.0%})", start, end)
    return None


def _reads_as_words(run: str) -> bool:
    """Everyday words glued together, not one long real word: the run's best split into
    words of its script's languages (English too) gives at least `_GLUED_EVERYDAY` of its
    letters to their most frequent words (`language.split_into_words`)."""
    return language.split_into_words(run, candidates(script_of(run), ())) >= _GLUED_EVERYDAY


_EDGE_LETTER = re.compile(r"\s([^\W\d_])(?!\w)")


def _spells_a_word(text: str, start: int, end: int, letters: list[str]) -> bool:
    """The chain spells one English word, its last letter perhaps glued to a full stop
    outside the chain ("S P E L L E D.")."""
    word = "".join(letters)
    after = _EDGE_LETTER.match(text, end)
    candidates = [word] + ([word + after.group(1)] if after else [])
    return any(language.is_known(w.casefold(), ("en",)) for w in candidates)


def spaced_letters(text: str, points: np.ndarray, cfg: GarbledKnobs
                    ) -> tuple[str, int, int] | None:
    """Characters one space apart ("T h e _ u s e r"): a chain of one-character tokens."""
    n = len(points)
    need = cfg.garbled_spaced_letters
    if n < 2 * need - 1:
        return None
    space = points == 0x20
    solid = ~space & ~lookup(_WHITESPACE, points)
    single = solid.copy()
    single[1:] &= space[:-1]
    single[:-1] &= space[1:]
    at = np.flatnonzero(single)
    if len(at) < need:
        return None
    linked = (at[1:] - at[:-1]) == 2
    edges = np.flatnonzero(np.diff(np.concatenate(([0], linked.view(np.int8), [0]))))
    for first, last in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
        start, end = int(at[first]), int(at[last]) + 1
        chars = text[start:end:2]
        letters = [c for c in chars if c.isalpha()]
        distinct = len({c.lower() for c in letters})
        if len(letters) < need or distinct < _SPACED_MIN_DISTINCT \
                or letters == sorted(letters) \
                or (len(letters) >= _KEY_ROW_LETTERS and distinct >= _KEY_ROW * len(letters)) \
                or _spells_a_word(text, start, end, letters):
            continue  # an alphabet, a keyboard row, a cipher's key, one word spelled out
        return (f"{len(letters)} letters in a row one space apart (threshold {need})",
                start, end)
    return None
