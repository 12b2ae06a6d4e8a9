"""`garbled`: text that is not language (token salad), with a clean finish.

A decode row that reads another request's KV (C128A and its relatives) answers in
sub-word soup of the whole vocabulary, bursts of `<｜begin▁of▁sentence｜>`, or noise, and
still finishes with `stop` or a well-formed tool call. The rule judges the reasoning, the
content and every string value of every tool call's arguments (walked recursively; raw
arguments that do not parse are judged as they are), each over windows, so a short
salad burst in the middle of a healthy reply is caught. Each detector flags only strong
evidence; its thresholds are `[verdicts]` keys (`garbled_*`, docs/scenario-keys.md):

- markers: special tokens (`<｜…｜>`, `<|…|>`), tokenizer markers glued after a letter
  (SentencePiece `▁`, byte-level BPE `Ġ`/`Ċ`) or in a row, byte pieces (`<0x0A>`), U+FFFD
  replacement characters, UTF-8 read as Latin-1 (`Ã©`) and stray control characters
  (not ANSI colours): at least `garbled_marker_burst` (4) within
  `garbled_marker_window_chars` (160), one of them repeated. A single special token
  named in prose, or a chat template spelled out once, is `token_leak`'s business.
- scripts: letters of two scripts that meet inside a word (no separator), or two
  non-Latin scripts separated only by spaces, where the pair is not explained: Latin and
  Han always are (DeepSeek answers in both), so are the request's own scripts
  (`params["scripts"]`), Han with kana or Hangul (Japanese, Korean), Latin with kana,
  Hangul or Greek (terms and units), Latin with the scripts written without spaces
  (Thai, Lao, Khmer, Myanmar, Tibetan). `garbled_script_switches` (4) such switches
  within `garbled_script_window_chars` (120). Whole words of many scripts with
  punctuation or Latin between them ("hello" in ten languages) are not switches, nor is
  a Russian reply's English terms set off by spaces.
- glued_fragments: runs of at least `garbled_glued_run_letters` (32) letters of one
  cased script (Latin, Cyrillic, Greek), lower case after the first but for a capital
  per 16 letters (camelCase has one every word), drawn from at least 10 letters (a DNA
  string or a hex hash is not words): at least 3 such runs (one of 96 letters counts
  three) and `garbled_glued_letters` (96) letters within `garbled_fragment_window_chars`
  (400), at least `garbled_glued_share` (0.75) of the window's letters. Words a
  detokeniser glued together without their spaces; a long compound named in a sentence,
  or two side by side, is not.
- spaced_letters: a chain of one-character tokens one space apart ("T h e _ u s e r")
  holding at least `garbled_spaced_letters` (24) letters, at least 8 distinct, not an
  alphabet in order (a word-search row, a spelled word or bits are shorter or fewer).
- shuffled_words: a window of `garbled_shuffle_window_words` (32) words of running text
  (80% of them follow the one before with only spaces between: not a table's cells or a
  list's items; a word is two letters or more, or one CJK character, and no digit
  touches it) with `garbled_shuffle_min_distinct` (5) to `garbled_shuffle_max_distinct`
  (12) distinct words whose distinct pairs reach `garbled_shuffle_min_bigram_ratio`
  (0.85) of what a random order of them gives: a handful of words shuffled. A template
  or a loop repeats its pairs and stays far below.
- noise: a window of `garbled_noise_window_chars` (192) characters, at most 10% outside
  ASCII, with at least `garbled_noise_min_symbol_share` (0.15) ASCII punctuation, a
  character entropy of at least `garbled_noise_min_bits` (5.8) bits and at least
  `garbled_noise_min_distinct_pairs` (0.93) of its character pairs distinct: random
  printable characters. Base64 (few symbols), hex hashes and UUIDs (4 bits), code,
  regexes and minified JSON (their pairs repeat) stay below; random strings one to a line
  (generated passwords, keys) are a list, a format.

What the defaults catch at the least: 4 markers in 160 characters (four BOS tokens in a
row); 4 switches in 120 characters (about 40 tokens of multilingual soup, a third of
them neither Latin nor Han); three runs of 32 glued letters (or one of 96); 24 spaced
letters; 32 words of a handful shuffled; 192 characters of printable noise (240 among
other text: windows lie a quarter apart). Not caught: soup of one script whose pieces
keep ordinary spaces ("ing the acc ount ations"), which only a lexicon would tell from a
language we do not know; noise laid out one string a line; a random sequence of a
handful of words that is honest (the digits of pi spelled out) is caught, wrongly; and
garbage too short to be any of the above (a tool argument of a dozen characters).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import orjson

from loadgen.judge.leaks import talked_about
from loadgen.judge.scripts import (
    FIRST_SCRIPT,
    HAN,
    INHERITED,
    LATIN,
    SCRIPT_ID,
    SCRIPTS,
    code_points,
    scripts_of,
)
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

EXCERPT_CHARS = 120


def _lookup(table: np.ndarray, points: np.ndarray) -> np.ndarray:
    """table[point] per character; code points past the table read its last entry."""
    if points.dtype == np.uint8 and len(table) >= 0x100:
        return table[points]
    return table[np.minimum(points, len(table) - 1)]


@dataclass(frozen=True, slots=True)
class Garble:
    """Where salad was found and what was measured, for the report's forensics."""

    field: str  # "reasoning", "content", or "call 0 change_plan.reason"
    kind: str  # the detector: markers, scripts, glued_fragments, spaced_letters, ...
    detail: str  # what it measured against its threshold
    excerpt: str  # the offending window, at most EXCERPT_CHARS characters


# ---------------------------------------------------------------------- markers

# UTF-8 read as Latin-1 or cp1252: a lead byte's character, then one continuation byte's
# (two-byte Latin: "é" -> "Ã©"), two (three-byte CJK) or three (four-byte emoji).
_CONTINUATION = ("[\u0080-\u00bf\u20ac\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030"
                 "\u0160\u2039\u0152\u017d\u2018\u2019\u201c\u201d\u2022\u2013\u2014"
                 "\u02dc\u2122\u0161\u203a\u0153\u017e\u0178]")
_MOJIBAKE = (f"[\u00c2-\u00c5]{_CONTINUATION}|[\u00e0-\u00ef]{_CONTINUATION}{{2}}"
             f"|[\u00f0-\u00f4]{_CONTINUATION}{{3}}")
_MARKER = re.compile(
    r"(?P<special><｜[^｜\n]{1,48}｜>?|<\|[A-Za-z0-9_▁:.\-]{1,48}\|>)"
    r"|(?P<piece>(?<=\w)[▁ĠĊ]|[▁ĠĊĉ](?=[▁ĠĊĉ])|<0x[0-9A-Fa-f]{2}>)"
    r"|(?P<replacement>\ufffd)"
    f"|(?P<mojibake>{_MOJIBAKE})"
    r"|(?P<control>[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]|\x1b(?!\[))")
# Characters a marker starts with (or is), for a screen that runs on every reply.
_SCREEN = np.zeros(0x10000, dtype=bool)
_SCREEN[[*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0),
         *range(0xC2, 0xF5), *map(ord, "▁ĠĊĉ\ufffd｜")]] = True
_SCREEN[-1] = False  # where code points past the table land


def _may_have_markers(text: str, points: np.ndarray) -> bool:
    """Cheap screen before the marker regex: most replies have none of its characters."""
    if "<|" in text or "<0x" in text or "\x1b" in text:
        return True
    return bool(_lookup(_SCREEN, points).any())


def _markers(text: str, points: np.ndarray, cfg: VerdictConfig) -> tuple[str, int, int] | None:
    if not _may_have_markers(text, points):
        return None
    # Special tokens an answer talks about (a chat template explained) are not a burst.
    hits = [(m.start(), m.group() if m.lastgroup == "special" else m.lastgroup)
            for m in _MARKER.finditer(text)
            if m.lastgroup != "special" or not talked_about(text, m.start(), m.end())]
    need, width = cfg.garbled_marker_burst, cfg.garbled_marker_window_chars
    lo = 0
    for hi in range(len(hits)):
        while hits[hi][0] - hits[lo][0] >= width:
            lo += 1
        if hi - lo + 1 >= need:
            keys = Counter(key for _, key in hits[lo:hi + 1])
            if keys.most_common(1)[0][1] >= 2:
                seen = ", ".join(f"{k} x{n}" for k, n in keys.most_common(4))
                return (f"{hi - lo + 1} markers within {width} chars (threshold {need}): "
                        f"{seen}", hits[lo][0], hits[hi][0] + 1)
    return None


# ---------------------------------------------------------------------- scripts

_CJK = ("Han", "Hiragana", "Katakana", "Bopomofo")
_EXPLAINED_PAIRS = [
    *((a, b) for a in _CJK for b in _CJK),  # Japanese, and Chinese with zhuyin
    ("Han", "Hangul"),  # Korean with hanja
    *(("Latin", s) for s in ("Hiragana", "Katakana", "Hangul", "Greek")),
    # Scripts written without spaces between words take Latin terms glued in.
    *(("Latin", s) for s in ("Thai", "Lao", "Khmer", "Myanmar", "Tibetan")),
    *(("Greek", s) for s in _CJK),  # math and units
]
_TABLE_SIZE = FIRST_SCRIPT + len(SCRIPTS)
_SPACES = np.zeros(0x3002, dtype=bool)  # the last entry: any code point past U+3000
_SPACES[[0x09, 0x20, 0xA0, 0x3000]] = True


@cache
def _explained(scripts: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """(script id -> explained, (id, id) -> a pair that is language) for a request."""
    ids = [SCRIPT_ID[s] for s in scripts | {"Latin", "Han"} if s in SCRIPT_ID]
    alone = np.zeros(_TABLE_SIZE, dtype=bool)
    alone[ids] = True
    pairs = alone[:, None] & alone[None, :]
    for a, b in _EXPLAINED_PAIRS:
        pairs[SCRIPT_ID[a], SCRIPT_ID[b]] = pairs[SCRIPT_ID[b], SCRIPT_ID[a]] = True
    return alone, pairs


def _script_switches(points: np.ndarray, scr: np.ndarray, explained: frozenset[str],
                     cfg: VerdictConfig) -> tuple[str, int, int] | None:
    alone, pairs = _explained(explained)
    letter = scr >= FIRST_SCRIPT
    if not (letter & ~alone[scr]).any():
        return None
    a, b = scr[:-1], scr[1:]
    glued = np.flatnonzero(letter[:-1] & letter[1:] & (a != b) & ~pairs[a, b]) + 1
    space = _lookup(_SPACES, points)
    index = np.arange(len(scr))
    last_solid = np.maximum.accumulate(np.where(space, -1, index))
    after_space = np.flatnonzero(letter[1:] & space[:-1]) + 1
    before = last_solid[after_space - 1]
    ok = before >= 0
    after_space, before = after_space[ok], before[ok]
    s1, s2 = scr[before], scr[after_space]
    spaced = after_space[(s1 >= FIRST_SCRIPT) & (s1 != s2) & ~pairs[s1, s2]
                         & (s1 != LATIN) & (s2 != LATIN)]
    found = np.union1d(glued, spaced)
    need, width = cfg.garbled_script_switches, cfg.garbled_script_window_chars
    if len(found) < need:
        return None
    spans = found[need - 1:] - found[:len(found) - need + 1]
    close = np.flatnonzero(spans < width)
    if not len(close):
        return None
    first = int(close[0])
    start, end = int(found[first]), int(found[first + need - 1])
    count = int(np.count_nonzero((found >= start) & (found < start + width)))
    window = scr[max(0, start - 1):start + width]
    seen = sorted({SCRIPTS[i - FIRST_SCRIPT] for i in np.unique(window).tolist()
                   if i >= FIRST_SCRIPT})
    strange = [s for s in seen if not alone[SCRIPT_ID[s]]]
    request = ", ".join(sorted(explained - {"Latin", "Han"})) or "none beyond Latin"
    return (f"{count} switches between scripts within {width} chars (threshold {need}): "
            f"{', '.join(strange)} among {', '.join(seen)}; the request's scripts: "
            f"{request}", max(0, start - 1), end + 1)


# -------------------------------------------------------------------- fragments

_ASCII_LETTER = np.zeros(0x100, dtype=bool)
_ASCII_LETTER[[*range(0x41, 0x5B), *range(0x61, 0x7B)]] = True
_CASED = np.zeros(_TABLE_SIZE, dtype=bool)
_CASED[[LATIN, SCRIPT_ID["Cyrillic"], SCRIPT_ID["Greek"]]] = True
_GLUED_MIN_DISTINCT = 10
_GLUED_MIN_RUNS = 3
_GLUED_LETTERS_PER_HUMP = 16  # camelCase has a capital every word, glued prose rarely
_SPACED_MIN_DISTINCT = 8
_WHITESPACE = np.zeros(0x3002, dtype=bool)  # the last entry: any code point past U+3000
_WHITESPACE[[0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x2028, 0x2029, 0x3000]] = True


def _runs(mask: np.ndarray, scr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of masked characters of one script."""
    n = len(mask)
    boundary = np.ones(n + 1, dtype=bool)  # between characters i-1 and i
    boundary[1:n] = (scr[1:] != scr[:-1]) | ~mask[1:] | ~mask[:-1]
    return np.flatnonzero(mask & boundary[:n]), np.flatnonzero(mask & boundary[1:]) + 1


def _glued(text: str, cased: np.ndarray, starts: np.ndarray, ends: np.ndarray,
           cfg: VerdictConfig) -> tuple[str, int, int] | None:
    lengths = ends - starts
    long = np.flatnonzero(lengths >= cfg.garbled_glued_run_letters)
    flat = []
    for i in long.tolist():
        run = text[starts[i]:ends[i]]
        humps = sum(1 for a, b in itertools.pairwise(run) if a.islower() and b.isupper())
        if humps * _GLUED_LETTERS_PER_HUMP <= len(run) and run[1:2].islower() \
                and len(set(run.lower())) >= _GLUED_MIN_DISTINCT:
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


def _spaced_letters(text: str, points: np.ndarray, cfg: VerdictConfig
                    ) -> tuple[str, int, int] | None:
    """Characters one space apart ("T h e _ u s e r"): a chain of one-character tokens."""
    n = len(points)
    need = cfg.garbled_spaced_letters
    if n < 2 * need - 1:
        return None
    space = points == 0x20
    solid = ~space & ~_lookup(_WHITESPACE, points)
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
        if len(letters) < need or len({c.lower() for c in letters}) < _SPACED_MIN_DISTINCT \
                or letters == sorted(letters):
            continue
        return (f"{len(letters)} letters in a row one space apart (threshold {need})",
                start, end)
    return None


# ------------------------------------------------------------------- statistics

_ASCII_UPPER = np.zeros(0x81, dtype=np.uint64)  # what folds an ASCII capital to lower case
_ASCII_UPPER[0x41:0x5B] = 0x20
_K = np.array([0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB,
               0xD6E8FEB86659FD93], dtype=np.uint64)  # odd 64-bit mixing constants
_RUNNING_TEXT = 0.8  # share of a window's words joined by spaces alone
_ONE_CHAR_WORDS = np.zeros(_TABLE_SIZE, dtype=bool)
_ONE_CHAR_WORDS[[HAN, SCRIPT_ID["Hiragana"], SCRIPT_ID["Katakana"]]] = True


def _words(points: np.ndarray, scr: np.ndarray | None,
           letter_runs: tuple[np.ndarray, np.ndarray] | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, joined) of the words: letter runs of one script that no digit
    touches (the letters of a hex hash or a UUID are not words), two letters or more; a
    CJK character is a word of its own. `joined`: one or two spaces or nothing between a
    word and the one before it (running text, not a table's cells or a list's items).
    ASCII text gives its letter runs and no scripts."""
    n = len(points)
    if scr is None and letter_runs is not None:
        starts, ends = letter_runs
        one_char_word = np.zeros(len(starts), dtype=bool)
    else:
        assert scr is not None
        letter = scr >= FIRST_SCRIPT
        begins = letter.copy()
        begins[1:] &= ~letter[:-1] | (scr[1:] != scr[:-1]) | _ONE_CHAR_WORDS[scr[1:]]
        last = np.ones(n, dtype=bool)  # the word ends after this character
        last[:-1] = begins[1:] | ~letter[1:]
        starts = np.flatnonzero(begins)
        ends = np.flatnonzero(letter & last) + 1
        one_char_word = _ONE_CHAR_WORDS[scr[starts]]
    before = points[np.maximum(starts - 1, 0)]
    after = points[np.minimum(ends, n - 1)]
    free = ((before < 0x30) | (before > 0x39) | (starts == 0)) \
        & ((after < 0x30) | (after > 0x39) | (ends == n))
    free &= (ends - starts > 1) | one_char_word  # not "a", "I", "C D E"
    starts, ends = starts[free], ends[free]
    gap = starts[1:] - ends[:-1]
    first = _lookup(_SPACES, points[np.minimum(ends[:-1], n - 1)])
    second = _lookup(_SPACES, points[np.minimum(ends[:-1] + 1, n - 1)])
    joined = np.zeros(len(starts), dtype=bool)
    joined[1:] = (gap == 0) | ((gap <= 2) & first & ((gap == 1) | second))
    return starts, ends, joined


def _folded(points: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Code points at these indexes, ASCII capitals in lower case."""
    chosen = points[at].astype(np.uint64)
    return chosen | _lookup(_ASCII_UPPER, chosen)


def _rough_keys(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """16 bits a word: its length and its first and last letters (words that share them
    count as one: a screen that may only find too few distinct words)."""
    length = np.minimum(ends - starts, 15).astype(np.uint64)
    key = (length << np.uint64(12)) ^ (_folded(points, starts) << np.uint64(6)) \
        ^ _folded(points, ends - 1)
    return (key & np.uint64(0xFFFF)).astype(np.uint16)


def _fingerprints(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A word's fingerprint: its length, its first, middle and last letters and the sum
    of its code points (one prefix sum for all the words), case-folded."""
    if points.dtype == np.uint8:
        folded = (points | np.uint8(0x20)).astype(np.uint64)  # letters are all that count
    else:
        folded = points.astype(np.uint64) | _lookup(_ASCII_UPPER, points)
    prefix = np.concatenate(([np.uint64(0)], np.cumsum(folded, dtype=np.uint64)))
    length = ends - starts
    return ((((length.astype(np.uint64) * _K[0] + folded[starts]) * _K[1]
              + folded[ends - 1]) * _K[2] + folded[starts + length // 2]) * _K[3]
            + prefix[ends] - prefix[starts])


def _dense(keys: np.ndarray) -> np.ndarray:
    """Keys renumbered 0, 1, 2... (equal keys, equal numbers)."""
    order = np.argsort(keys)
    ordered = keys[order]
    new = np.ones(len(keys), dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    ids = np.empty(len(keys), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


def _previous(ids: np.ndarray) -> np.ndarray:
    """Index of each id's previous occurrence, or -1 (16-bit ids sort in linear time)."""
    if len(ids) and int(ids.max()) < 1 << 16:
        ids = ids.astype(np.uint16)
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    prev = np.full(len(ids), -1, dtype=np.int64)
    same = np.flatnonzero(ordered[1:] == ordered[:-1]) + 1
    prev[order[same]] = order[same - 1]
    return prev


def _window_starts(length: int, size: int) -> np.ndarray:
    """Starts of windows of `size` over `length` items, a quarter window apart, the last
    one flush with the end (a burst anywhere lies whole in one of them once it is a
    quarter longer than the window)."""
    starts = np.arange(0, length - size + 1, max(1, size // 4))
    if starts[-1] != length - size:
        starts = np.append(starts, length - size)
    return starts


def _distinct_per_window(prev: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """Distinct keys in each window [start, start + size), from previous occurrences."""
    cells = prev[starts[:, None] + np.arange(size)]
    return np.count_nonzero(cells < starts[:, None], axis=1)


def _shuffled(points: np.ndarray, scr: np.ndarray | None,
              letter_runs: tuple[np.ndarray, np.ndarray] | None, cfg: VerdictConfig
              ) -> tuple[str, int, int] | None:
    size = cfg.garbled_shuffle_window_words
    word_starts, word_ends, joined = _words(points, scr, letter_runs)
    if len(word_starts) < size:
        return None
    starts = _window_starts(len(word_starts), size)
    linked = np.concatenate(([0], np.cumsum(joined)))
    running = (linked[starts + size] - linked[starts + 1]) >= _RUNNING_TEXT * (size - 1)
    low, high = cfg.garbled_shuffle_min_distinct, cfg.garbled_shuffle_max_distinct
    # A screen on 16 bits a word (words that share them count once, so no window of few
    # words is missed), then the windows it leaves, exactly.
    rough = _previous(_rough_keys(points, word_starts, word_ends))
    starts = starts[running & (_distinct_per_window(rough, starts, size) <= high)]
    if not len(starts):
        return None
    ids = _dense(_fingerprints(points, word_starts, word_ends))
    distinct = _distinct_per_window(_previous(ids), starts, size)
    keep = (distinct >= low) & (distinct <= high)
    starts, distinct = starts[keep], distinct[keep]
    if not len(starts):
        return None
    bigrams = _dense(ids[:-1] * (int(ids.max()) + 1) + ids[1:])
    pairs = _distinct_per_window(_previous(bigrams), starts, size - 1)
    cells = distinct.astype(np.float64) ** 2
    expected = cells * -np.expm1(-(size - 1) / cells)
    ratio = pairs / expected
    hit = np.flatnonzero(ratio >= cfg.garbled_shuffle_min_bigram_ratio)
    if not len(hit):
        return None
    k = int(hit[0])
    first = int(starts[k])
    end_word = first + size
    end = int(word_starts[end_word]) if end_word < len(word_starts) else len(points)
    return (f"{size} words with {int(distinct[k])} distinct (threshold "
            f"{low}-{high}) in random order: {int(pairs[k])} distinct bigrams, "
            f"{ratio[k]:.2f} of a random shuffle's (threshold "
            f"{cfg.garbled_shuffle_min_bigram_ratio})", int(word_starts[first]), end)


# Character classes for noise: 0 space, 1 lower, 2 upper, 3 digit, 4 ASCII punctuation,
# 5 anything else (not ASCII).
_CLASS = np.full(0x81, 5, dtype=np.uint8)
_CLASS[:0x80] = 0
_CLASS[[*range(33, 48), *range(58, 65), *range(91, 97), *range(123, 127)]] = 4
_CLASS[0x30:0x3A] = 3
_CLASS[0x41:0x5B] = 2
_CLASS[0x61:0x7B] = 1
_NOISE_MAX_FOREIGN = 0.1  # noise here is ASCII: other scripts are the scripts detector's
_NOISE_MIN_SWITCHES = 0.5  # a screen: random characters change class at 3 in 4
_LIST_MIN_ITEMS = 2
_LIST_ITEM_SPACES = 3
_LIST_SHARE = 0.75


def _a_list_of_strings(text: str, start: int, end: int) -> bool:
    """The window's lines are items of a list: one string each, at most a number and a
    space or two besides (generated passwords or keys, a format). Random characters in
    one run of text are not."""
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    lines = [line.strip() for line in text[lo:hi if hi >= 0 else len(text)].split("\n")]
    items = [line for line in lines if line and line.count(" ") <= _LIST_ITEM_SPACES]
    return len(items) >= _LIST_MIN_ITEMS and \
        sum(map(len, items)) >= _LIST_SHARE * sum(map(len, lines))


def _noise(text: str, points: np.ndarray, cfg: VerdictConfig) -> tuple[str, int, int] | None:
    size = cfg.garbled_noise_window_chars
    n = len(points)
    if n < size:
        return None
    klass = _lookup(_CLASS, points)
    starts = _window_starts(n, size)
    sums = np.concatenate(([0], np.cumsum(klass == 4)))
    symbols = sums[starts + size] - sums[starts]
    screen = symbols >= cfg.garbled_noise_min_symbol_share * size
    if not screen.any():  # prose: the first screen ends it
        return None
    sums = [np.concatenate(([0], np.cumsum(v))) for v in
            (klass == 5, np.concatenate(([False], klass[1:] != klass[:-1])))]
    foreign, switches = (c[starts + size] - c[starts] for c in sums)
    screen &= (foreign <= _NOISE_MAX_FOREIGN * size) & (switches >= _NOISE_MIN_SWITCHES * size)
    for k in np.flatnonzero(screen).tolist():
        start = int(starts[k])
        window = points[start:start + size].astype(np.uint32)
        _, freq = np.unique(window, return_counts=True)
        p = freq / size
        bits = float(-(p * np.log2(p)).sum())
        pairs = len(np.unique((window[:-1] << np.uint32(16)) | window[1:])) / (size - 1)
        if bits >= cfg.garbled_noise_min_bits and pairs >= cfg.garbled_noise_min_distinct_pairs \
                and not _a_list_of_strings(text, start, start + size):
            return (f"{size} chars of {bits:.2f} bits per char (threshold "
                    f"{cfg.garbled_noise_min_bits}), {pairs:.0%} distinct character pairs "
                    f"(threshold {cfg.garbled_noise_min_distinct_pairs:.0%}), "
                    f"{int(symbols[k]) / size:.0%} punctuation (threshold "
                    f"{cfg.garbled_noise_min_symbol_share:.0%})", start, start + size)
    return None


# ------------------------------------------------------------------------ judge

def garble_in_text(text: str, explained: frozenset[str], cfg: VerdictConfig
                   ) -> tuple[str, str, str] | None:
    """(kind, detail, excerpt) of the first salad found in one text, or None."""
    if not text:
        return None
    points = code_points(text)
    found = _markers(text, points, cfg)
    if found:
        return _report("markers", text, found)
    scr: np.ndarray | None = None
    letter_runs = None
    if points.dtype == np.uint8:  # ASCII: one script, its letters are the cased ones
        cased = _ASCII_LETTER[points]
        edges = np.flatnonzero(np.diff(np.concatenate(([False], cased, [False])).view(
            np.int8)))
        starts, ends = letter_runs = edges[0::2], edges[1::2]
    else:
        scr = scripts_of(points)
        inherited = scr == INHERITED
        if inherited.any():  # a combining mark takes the script of its letter
            fill = np.maximum.accumulate(np.where(inherited, 0, np.arange(len(scr))))
            scr = scr[fill]
        found = _script_switches(points, scr, explained, cfg)
        if found:
            return _report("scripts", text, found)
        cased = _CASED[scr]
        starts, ends = _runs(cased, scr)
    found = _glued(text, cased, starts, ends, cfg)
    if found:
        return _report("glued_fragments", text, found)
    found = _spaced_letters(text, points, cfg)
    if found:
        return _report("spaced_letters", text, found)
    found = _noise(text, points, cfg)
    if found:
        return _report("noise", text, found)
    found = _shuffled(points, scr, letter_runs, cfg)
    if found:
        return _report("shuffled_words", text, found)
    return None


def _report(kind: str, text: str, found: tuple[str, int, int]) -> tuple[str, str, str]:
    detail, start, end = found
    end = min(max(end, start + 1), start + EXCERPT_CHARS)
    return kind, detail, text[start:end]


def _string_values(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string in a parsed JSON value with its path, in order (a loop, not
    recursion: arguments may nest as deep as the parser allows)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            yield where, item
        elif isinstance(item, dict):
            stack += reversed([(v, f"{where}.{k}") for k, v in item.items()])
        elif isinstance(item, list):
            stack += reversed([(v, f"{where}[{i}]") for i, v in enumerate(item)])


def _texts(record: RequestRecord) -> Iterator[tuple[str, str]]:
    """Every text of a reply, named as the finding names it."""
    yield "reasoning", record.reasoning
    yield "content", record.content
    for i, call in enumerate(record.tool_calls):
        fn = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = fn.get("name") or "?"
        raw = fn.get("arguments") or ""
        if not isinstance(raw, str):
            continue
        try:
            args = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            yield f"call {i} {name} arguments", raw
            continue
        yield from _string_values(args, f"call {i} {name}")


def find_garble(record: RequestRecord, cfg: VerdictConfig) -> Garble | None:
    """The first salad in a reply's reasoning, content or tool-call argument values."""
    if not cfg.garbled:
        return None
    scripts = record.params.get("scripts") or ()
    explained = frozenset(s for s in scripts if isinstance(s, str))
    for field, text in _texts(record):
        found = garble_in_text(text, explained, cfg)
        if found:
            return Garble(field, *found)
    return None
