"""The `shuffled_words` and `noise` detectors: degenerate statistics over windows (a
handful of words in random order; printable noise that is no known format)."""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import compress

import numpy as np

from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.garbled.points import SPACES, TABLE_SIZE, lookup
from loadgen.judge.text.scripts import (
    FIRST_SCRIPT,
    HAN,
    SCRIPT_ID,
)

_ASCII_UPPER = np.zeros(0x81, dtype=np.uint64)  # what folds an ASCII capital to lower case
_ASCII_UPPER[0x41:0x5B] = 0x20
_K = np.array([0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB,
               0xD6E8FEB86659FD93], dtype=np.uint64)  # odd 64-bit mixing constants
_RUNNING_TEXT = 0.8  # share of a window's words joined by spaces alone
_ONE_CHAR_WORDS = np.zeros(TABLE_SIZE, dtype=bool)
_ONE_CHAR_WORDS[[HAN, SCRIPT_ID["Hiragana"], SCRIPT_ID["Katakana"]]] = True


def _words(points: np.ndarray, scr: np.ndarray | None,
           letter_runs: tuple[np.ndarray, np.ndarray] | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the words: letter runs of one script that no digit touches (the
    letters of a hex hash or a UUID are not words), two letters or more; a CJK character
    is a word of its own. ASCII text gives its letter runs and no scripts."""
    n = len(points)
    if letter_runs is not None:
        starts, ends = letter_runs
        one_char_word = np.zeros(len(starts), dtype=bool)
    else:
        assert scr is not None
        letter = scr >= FIRST_SCRIPT
        begins = letter.copy()
        # After a character of another script (or no letter: those have no script).
        begins[1:] &= (scr[1:] != scr[:-1]) | _ONE_CHAR_WORDS[scr[1:]]
        last = np.ones(n, dtype=bool)  # the word ends after this character
        last[:-1] = begins[1:] | ~letter[1:]
        starts = np.flatnonzero(begins)
        ends = np.flatnonzero(letter & last) + 1
        one_char_word = _ONE_CHAR_WORDS[scr[starts]]
    before = points[np.maximum(starts - 1, 0)]  # a word's own letter at the text's ends
    after = points[np.minimum(ends, n - 1)]
    free = ((before < 0x30) | (before > 0x39)) & ((after < 0x30) | (after > 0x39))
    free &= (ends - starts > 1) | one_char_word  # not "a", "I", "C D E"
    return starts[free], ends[free]


def _joined(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per word: one or two spaces or nothing between it and the word before it (running
    text, not a table's cells or a list's items)."""
    n = len(points)
    gap = starts[1:] - ends[:-1]
    first = lookup(SPACES, points[np.minimum(ends[:-1], n - 1)])
    second = lookup(SPACES, points[np.minimum(ends[:-1] + 1, n - 1)])
    joined = np.zeros(len(starts), dtype=bool)
    joined[1:] = (gap == 0) | ((gap <= 2) & first & ((gap == 1) | second))
    return joined


def _folded(points: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Code points at these indexes, ASCII capitals in lower case."""
    chosen = points[at].astype(np.uint64)
    return chosen | lookup(_ASCII_UPPER, chosen)


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
    folded = points.astype(np.uint64) | lookup(_ASCII_UPPER, points)
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
    """Index of each id's previous occurrence, or -1 (ids as the narrowest integers that
    hold them: 16-bit ones sort in linear time)."""
    order = np.argsort(ids.astype(np.min_scalar_type(int(ids.max()))), kind="stable")
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


#: A word of `_words` in ASCII text: a whole run of two letters or more, no digit before
#: or after it.
_ASCII_WORD = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2,}+(?![A-Za-z0-9])")
#: ASCII texts up to this long are screened for `shuffled` in Python (`may_be_shuffled`);
#: longer ones go straight to numpy, which pays for its calls there.
_SMALL_CHARS = 2048


@lru_cache(maxsize=1 << 15)  # words come back: a lookup costs less than the arithmetic
def _rough_key(word: str) -> int:
    """`_rough_keys` of one ASCII word: length (at most 15), first and last letter, ASCII
    case folded (a letter's 0x20 bit set), 16 bits."""
    return ((min(len(word), 15) << 12) ^ ((ord(word[0]) | 0x20) << 6)
            ^ (ord(word[-1]) | 0x20)) & 0xFFFF


def may_be_shuffled(text: str, cfg: GarbledKnobs) -> bool:
    """False only where `shuffled` finds nothing in this ASCII text: its first screen
    (some window of its words with few enough distinct 16-bit keys), computed in
    Python, the same words, keys and windows; for a short reply this costs a few
    microseconds where numpy's calls cost tens. A long text is not screened here."""
    if len(text) > _SMALL_CHARS:
        return True
    size = cfg.garbled_shuffle_window_words
    found = _ASCII_WORD.findall(text)
    if len(found) < size:
        return False
    keys = list(map(_rough_key, found))
    step = max(1, size // 4)
    starts = list(range(0, len(keys) - size + 1, step))
    if starts[-1] != len(keys) - size:
        starts.append(len(keys) - size)
    high = cfg.garbled_shuffle_max_distinct
    return any(len(set(keys[s:s + size])) <= high for s in starts)


def shuffled(points: np.ndarray, scr: np.ndarray | None,
              letter_runs: tuple[np.ndarray, np.ndarray] | None, cfg: GarbledKnobs
              ) -> tuple[str, int, int] | None:
    size = cfg.garbled_shuffle_window_words
    word_starts, word_ends = _words(points, scr, letter_runs)
    if len(word_starts) < size:
        return None
    starts = _window_starts(len(word_starts), size)
    low, high = cfg.garbled_shuffle_min_distinct, cfg.garbled_shuffle_max_distinct
    # A screen on 16 bits a word (words that share them count once, so no window of few
    # words is missed), then, of the windows it leaves, those of running text, exactly.
    rough = _previous(_rough_keys(points, word_starts, word_ends))
    starts = starts[_distinct_per_window(rough, starts, size) <= high]
    if not len(starts):
        return None
    linked = np.cumsum(_joined(points, word_starts, word_ends))  # a first word need not be
    starts = starts[linked[starts + size - 1] - linked[starts] >= _RUNNING_TEXT * (size - 1)]
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
_LIST_ITEM_SPREAD = 1  # "9. `key`" and "10. `key`"


def _one_string(line: str, size: int) -> bool:
    """A line that may be an item of a list: one string, at most a number and a space or
    two besides, too short to hold a window by itself (a window within one line is
    random characters in one run of text)."""
    return len(line) < size and line.count(" ") <= _LIST_ITEM_SPACES


def _a_list_of_strings(text: str, start: int, end: int, size: int) -> bool:
    """The window's lines are items of a list, one string each (generated passwords or
    keys of any lengths). Random characters in one run of text are not."""
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    lines = [line for line in map(str.strip, text[lo:hi if hi >= 0 else len(text)].split("\n"))
             if line]
    items = [line for line in lines if _one_string(line, size)]
    return len(items) >= _LIST_MIN_ITEMS and \
        sum(map(len, items)) >= _LIST_SHARE * sum(map(len, lines))


def _outside_lists(text: str, size: int) -> np.ndarray:
    """Which characters lie outside the text's lists of strings of one length: runs of
    items each as long as the one before, give or take a character (generated passwords
    or keys: a format wherever it lies, next to a sentence too; blank lines between them
    allowed), and outside its runs of setting lines (`NAME=value`). Noise broken into
    lines has lengths as random as the rest; a lone line between sentences is no list."""
    keep = np.full(len(text), True)
    run: list[tuple[int, int, int]] = []  # the current run's items: start, end, length
    at = 0
    for line in text.split("\n"):
        item = line.strip()
        if item:
            one = _one_string(item, size)
            if not (one and run and abs(len(item) - run[-1][2]) <= _LIST_ITEM_SPREAD):
                _drop(keep, run)
                run = []
            if one:
                run.append((at, at + len(line), len(item)))
        at += len(line) + 1
    _drop(keep, run)
    _drop_settings(text, keep)
    return keep


#: A line of settings: a name, `=` or `:`, a value (.env, INI, YAML, shell exports).
_SETTING = re.compile(r"\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_.-]*\s*[=:]\s*\S")


def _drop_settings(text: str, keep: np.ndarray) -> None:
    """Take runs of two setting lines or more out of the text: a secret is the value of
    a named setting, random by design (a sample .env file, a config)."""
    run: list[tuple[int, int, int]] = []
    at = 0
    for line in text.split("\n"):
        if _SETTING.match(line):
            run.append((at, at + len(line), 0))
        elif line.strip():
            _drop(keep, run)
            run = []
        at += len(line) + 1
    _drop(keep, run)


def _drop(keep: np.ndarray, run: list[tuple[int, int, int]]) -> None:
    """Take a run of items out of the text if it is a list (two items or more)."""
    if len(run) >= _LIST_MIN_ITEMS:
        keep[run[0][0]:run[-1][1]] = False


def _noisy(text: str, points: np.ndarray, cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    """The first window of random printable characters whose lines are no list of
    strings (`text` is what `points` spell: its lines are read only for such a window)."""
    size = cfg.garbled_noise_window_chars
    n = len(points)
    if n < size:
        return None
    klass = lookup(_CLASS, points)
    starts = _window_starts(n, size)
    sums = np.concatenate(([0], np.cumsum(klass == 4)))
    symbols = sums[starts + size] - sums[starts]
    screen = symbols >= cfg.garbled_noise_min_symbol_share * size
    if not screen.any():  # prose: the first screen ends it
        return None
    running = [np.concatenate(([0], np.cumsum(v))) for v in
               (klass == 5, np.concatenate(([False], klass[1:] != klass[:-1])))]
    foreign, switches = (c[starts + size] - c[starts] for c in running)
    screen &= (foreign <= _NOISE_MAX_FOREIGN * size) & (switches >= _NOISE_MIN_SWITCHES * size)
    for k in np.flatnonzero(screen).tolist():
        start = int(starts[k])
        window = points[start:start + size].astype(np.uint32)
        _, freq = np.unique(window, return_counts=True)
        p = freq / size
        bits = float(-(p * np.log2(p)).sum())
        pairs = len(np.unique((window[:-1] << np.uint32(16)) | window[1:])) / (size - 1)
        if bits >= cfg.garbled_noise_min_bits and pairs >= cfg.garbled_noise_min_distinct_pairs \
                and not _a_list_of_strings(text, start, start + size, size):
            return (f"{size} chars of {bits:.2f} bits per char (threshold "
                    f"{cfg.garbled_noise_min_bits}), {pairs:.0%} distinct character pairs "
                    f"(threshold {cfg.garbled_noise_min_distinct_pairs:.0%}), "
                    f"{int(symbols[k]) / size:.0%} punctuation (threshold "
                    f"{cfg.garbled_noise_min_symbol_share:.0%})", start, start + size)
    return None


def noise(text: str, points: np.ndarray, cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    """The first noisy window that is no list; where lists of strings of one length lie
    in the text, the first in what is left once they are taken out (looked for only
    then: it costs a pass over the lines)."""
    found = _noisy(text, points, cfg)
    if found is None:
        return None
    keep = _outside_lists(text, cfg.garbled_noise_window_chars)
    if keep.all():
        return found
    kept = np.flatnonzero(keep)
    found = _noisy("".join(compress(text, keep.tolist())), points[kept], cfg)
    if found is None:
        return None
    detail, start, end = found
    return detail, int(kept[start]), int(kept[end - 1]) + 1
