"""A screen before the word detectors, for the reply most often read: ASCII English.

The word detectors (`garbled.words`, `garbled.word_order`) read running text word by
word. Most replies a load test reads are plain English, and for those a pass over the
raw tokens, at C speed, shows which detectors could fire at all: each test here is a
necessary condition of its detector (or, for the word order, a looser one), so a text
that passes them all is judged without the word-by-word reading, and one that does not
is read in full. A text that is not mostly English's common words is not screened.

A short reply (the common case: a load test's 64-token replies) has too few words for
numpy to pay for its calls, so its windows are summed in Python, the same sums in the
same order (a prefix sum adds one value at a time either way), so the same result.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from functools import cache

import numpy as np

from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.garbled.word_order import _model
from loadgen.judge.text import language

# Possessive (nothing after a run of letters could make it give any back): the same
# tokens, found faster.
_TOKEN = re.compile(r"[a-z]++(?:'[a-z]++)*+|[.!?,;:]")
#: The tokens that are punctuation, not words.
_MARKS = frozenset(".!?,;:")
#: The screen lets through any text whose worst window of steps reaches this share of
#: the word-order threshold (a looser window than the detector's own).
_ORDER_MARGIN = 0.5
#: Up to this many tokens, a text's windows are summed in Python (numpy's calls cost more
#: than the sums themselves); past it, with numpy.
_SMALL = 256


@cache
def _score_rows() -> list[list[float]]:
    """The word-order scores as Python floats (the same float64 values), for short texts."""
    _, score = _model()
    return [[float(v) for v in row] for row in score.tolist()]


@cache
def _classes() -> tuple[dict[str, int], int]:
    index, _ = _model()
    classes = dict(index)
    for mark in ".!?":
        classes[mark] = index["<s>"]
    for mark in ",;:":
        classes[mark] = index["<,>"]
    assert len(index) <= 256, "class indexes must fit a byte"
    return classes, index["<w>"]


def _sliding_min(values: np.ndarray, size: int) -> float:
    if len(values) < size:
        return float(values.sum()) if len(values) else 0.0
    sums = np.concatenate(([0.0], np.cumsum(values)))
    return float((sums[size:] - sums[:-size]).min())


def _sliding_min_list(values: list[float] | list[bool], size: int) -> float:
    """`_sliding_min` of a short list, without numpy: the prefix sums add one value at a
    time as numpy's cumsum does, so every window's sum is the same float (flags sum as
    integers, exactly as their float sums)."""
    if len(values) < size:
        return _sliding_min(np.asarray(values, dtype=np.float64), size)
    sums = list(itertools.accumulate(values, initial=0))
    return min(map(operator.sub, sums[size:], sums))


def _may_have_unknown_window(known: bytes, need: int, size: int) -> bool:
    """`need` words English's word list lacks (a 0 in `known`, one byte a word) within
    some `size` words in a row.

    unknown_words counts, in a window of at most `size` words of running text, the
    words of none of the text's languages (English always among them), and needs at
    least `need`. In ASCII text its words are these tokens less some (names, words
    touching digits), and the words of one run of running text are consecutive tokens:
    so the window's unknown words are among `size` consecutive tokens here."""
    if need <= 0:
        return True
    at: list[int] = []
    i = known.find(0)
    while i >= 0:  # a pass per unknown word (few), the search between at C speed
        at.append(i)
        if len(at) >= need and i - at[-need] < size:
            return True
        i = known.find(0, i + 1)
    return False


def could_fire(text: str, cfg: GarbledKnobs) -> set[str] | None:
    """The word detectors that could fire on an ASCII text, or None where the text is
    not plain English (then every detector reads it)."""
    tokens = _TOKEN.findall(text.lower())
    words = list(itertools.filterfalse(_MARKS.__contains__, tokens))
    if not language.mostly_english(words[:400]):
        return None
    out: set[str] = set()
    # unknown_words needs this many words that are no language's in a window, and its
    # languages for a Latin word always include English (`words.candidates`): so at
    # least this many words English's whole word list lacks, within one window's worth
    # of words in a row. (Its words are these tokens less names and words touching
    # digits: never more of them.)
    known = bytes(map(language.known_words("en").__contains__, words))
    need = math.ceil(cfg.garbled_lexicon_unknown_share * 10)
    if len(words) - known.count(1) >= need and \
            _may_have_unknown_window(known, need, cfg.garbled_lexicon_window_words):
        out.add("unknown_words")
    small = len(tokens) <= _SMALL
    # no_function_words needs a window of words with at most this many function words.
    size = cfg.garbled_function_window_words
    if len(words) >= size:
        allowed = cfg.garbled_function_share * language.expected_function_share("en") * size
        is_function = language.function_words("en").__contains__
        if small:
            least = _sliding_min_list(list(map(is_function, words)), size)
        else:
            flags = np.frombuffer(bytes(map(is_function, words)), dtype=np.uint8)
            least = _sliding_min(flags.astype(np.float64), size)
        if least < allowed:
            out.add("no_function_words")
    # word_order: any window of steps that speaks against English at all strongly.
    size = cfg.garbled_order_window_words
    if len(words) >= size:
        classes, other = _classes()
        if small:
            rows = _score_rows()
            sequence = list(map(classes.get, tokens, itertools.repeat(other)))
            steps = [rows[a][b] for a, b in itertools.pairwise(sequence)]
            least = _sliding_min_list(steps, size - 1)
        else:
            _, score = _model()
            # Class indexes fit a byte (`_classes` asserts it): built at C speed.
            array = np.frombuffer(bytes(map(classes.get, tokens, itertools.repeat(other))),
                                  dtype=np.uint8)
            least = _sliding_min(score[array[:-1], array[1:]], size - 1)
        if least <= -_ORDER_MARGIN * cfg.garbled_order_llr:
            out.add("word_order")
    return out
