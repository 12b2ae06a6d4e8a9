"""The `word_order` detector of `garbled`: English running text whose words are real but
not in an order English puts them.

Real words in random order keep every word statistic of the language: its vocabulary,
even the share of its function words when they are drawn in the language's own
proportions. What they lose is order. English orders its function words strictly ("of
the", never "the of"; "to be", never "the and"), so each step from one word to the next
is scored by how much likelier it is in English than it would be by chance: the log
ratio of P(next | this) to P(next), over the classes of English's 100 most frequent
words, a content word, a full stop and a comma. The probabilities are counts taken from
the English of Python's documentation and of Debian's fortune cookies
(`english_order.json`, rebuilt by `tools/build_english_order.py`), Witten-Bell smoothed.
Adding a window's steps gives how much its order speaks for English (positive) or
against it (negative). A window of `garbled_order_window_words` (24) words of running
text, at least half of them distinct, at or below `-garbled_order_llr` (12 nats) is
words put in random order: honest answers, technical strings and documentation score
above -2, real words shuffled about -20 (docs/testing.md). A few values repeated (yes
no no yes) is an answer, not this.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.garbled.words import Words, distinct_enough, runs, windows

_TABLE = Path(__file__).with_name("english_order.json")
_ALPHA = 0.5  # add-half smoothing of the counts


@cache
def _model() -> tuple[dict[str, int], np.ndarray]:
    """(class -> index, log P(next | this) - log P(next) for every pair of classes).

    P(next | this) is Witten-Bell smoothed toward P(next): a class seen seldom, or seen
    followed by many different classes, leans on P(next), so a pair the counts know
    little about scores near zero (no evidence either way) rather than against English."""
    table = json.loads(_TABLE.read_text())
    classes = [*table["function_words"], "<w>", "<s>", "<,>"]
    index = {c: i for i, c in enumerate(classes)}
    n = len(classes)
    unigrams = np.array([table["unigrams"].get(c, 0) for c in classes], dtype=np.float64)
    pairs = np.zeros((n, n))
    for a, b, count in table["bigrams"]:
        pairs[index[a], index[b]] = count
    alone = (unigrams + _ALPHA) / (unigrams.sum() + _ALPHA * n)
    seen = pairs.sum(axis=1)
    followers = (pairs > 0).sum(axis=1)
    weight = np.where(seen > 0, seen / np.maximum(seen + followers, 1), 0.0)[:, None]
    follow = weight * pairs / np.maximum(seen, 1)[:, None] + (1 - weight) * alone[None, :]
    return index, np.log(follow) - np.log(alone)[None, :]


def _steps(found: Words, first: int, last: int, index: dict[str, int],
           score: np.ndarray) -> np.ndarray:
    """Prefix sums of the score of each step of a run: from one word to the next, through
    the full stop or comma class where the gap between them holds one (the sum from word
    i to word j is steps[j] - steps[i])."""
    get, other = index.get, index["<w>"]
    classes = np.array([get(k, other) for k in found.keys[first:last]], dtype=np.int64)
    gaps = found.before[first + 1:last]
    stop = np.array(["." in g or "!" in g or "?" in g for g in gaps], dtype=bool)
    comma = np.array(["," in g or ";" in g or ":" in g for g in gaps], dtype=bool) & ~stop
    a, b = classes[:-1], classes[1:]
    direct = score[a, b]
    through_stop = score[a, index["<s>"]] + score[index["<s>"], b]
    through_comma = score[a, index["<,>"]] + score[index["<,>"], b]
    step = np.where(stop, through_stop, np.where(comma, through_comma, direct))
    return np.concatenate(([0.0], np.cumsum(step)))


def word_order(text: str, found: Words, cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    size = cfg.garbled_order_window_words
    index, score = _model()
    for first, last in runs(found, size):
        steps = _steps(found, first, last, index, score)
        for lo, hi in windows(found, first, last, size):
            total = float(steps[hi - 1 - first] - steps[lo - first])
            if total <= -cfg.garbled_order_llr and distinct_enough(found, lo, hi):
                return (f"{hi - lo} words whose order speaks {-total:.1f} nats against "
                        f"English (threshold {cfg.garbled_order_llr:g}): real words in an "
                        "order English does not put them", found.starts[lo],
                        found.ends[hi - 1])
    return None
