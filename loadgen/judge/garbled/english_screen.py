"""A screen before the word detectors, for the reply most often read: ASCII English.

The word detectors (`garbled.words`, `garbled.word_order`) read running text word by
word. Most replies a load test reads are plain English, and for those a pass over the
raw tokens, at C speed, shows which detectors could fire at all: each test here is a
necessary condition of its detector (or, for the word order, a looser one), so a text
that passes them all is judged without the word-by-word reading, and one that does not
is read in full. A text that is not mostly English's common words is not screened.
"""

from __future__ import annotations

import math
import re
from functools import cache

import numpy as np

from loadgen.judge import language
from loadgen.judge.garbled.word_order import _model
from loadgen.scenario import VerdictConfig

_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)*|[.!?,;:]")
#: The screen lets through any text whose worst window of steps reaches this share of
#: the word-order threshold (a looser window than the detector's own).
_ORDER_MARGIN = 0.5


@cache
def _classes() -> tuple[dict[str, int], int]:
    index, _ = _model()
    classes = dict(index)
    for mark in ".!?":
        classes[mark] = index["<s>"]
    for mark in ",;:":
        classes[mark] = index["<,>"]
    return classes, index["<w>"]


def _sliding_min(values: np.ndarray, size: int) -> float:
    if len(values) < size:
        return float(values.sum()) if len(values) else 0.0
    sums = np.concatenate(([0.0], np.cumsum(values)))
    return float((sums[size:] - sums[:-size]).min())


def could_fire(text: str, cfg: VerdictConfig) -> set[str] | None:
    """The word detectors that could fire on an ASCII text, or None where the text is
    not plain English (then every detector reads it)."""
    tokens = _TOKEN.findall(text.lower())
    words = [t for t in tokens if t[0].isalpha()]
    if not language.mostly_english(words[:400]):
        return None
    out: set[str] = set()
    # unknown_words needs this many words that are no language's in a window, and its
    # languages for a Latin word always include English (`words.candidates`): so at
    # least this many words English's whole word list lacks. (Its words are these
    # tokens less names and words touching digits: never more of them.)
    known = language.known_words("en")
    if len(words) - sum(map(known.__contains__, words)) >= \
            math.ceil(cfg.garbled_lexicon_unknown_share * 10):
        out.add("unknown_words")
    # no_function_words needs a window of words with at most this many function words.
    size = cfg.garbled_function_window_words
    if len(words) >= size:
        function = np.fromiter(map(language.function_words("en").__contains__, words),
                               dtype=np.float64, count=len(words))
        allowed = cfg.garbled_function_share * language.expected_function_share("en") * size
        if _sliding_min(function, size) < allowed:
            out.add("no_function_words")
    # word_order: any window of steps that speaks against English at all strongly.
    size = cfg.garbled_order_window_words
    if len(words) >= size:
        classes, other = _classes()
        _, score = _model()
        sequence = np.fromiter((classes.get(t, other) for t in tokens), dtype=np.int64,
                               count=len(tokens))
        steps = score[sequence[:-1], sequence[1:]]
        if _sliding_min(steps, size - 1) <= -_ORDER_MARGIN * cfg.garbled_order_llr:
            out.add("word_order")
    return out
