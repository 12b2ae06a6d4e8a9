"""The English screen before the word detectors: a necessary condition, never a verdict.

A text the screen clears of `unknown_words` must be one the detector itself clears; and
honest prose with rare words (outside English's 30,000 most frequent, inside its word
list) must be cleared, so the word-by-word reading is not paid for it.
"""

from __future__ import annotations

import random

import wordfreq

from loadgen.judge.reply.garbled.english_screen import could_fire
from loadgen.judge.reply.garbled.words import unknown_words, words
from loadgen.judge.text import language
from loadgen.scenario import VerdictConfig

CFG = VerdictConfig()
COMMON = wordfreq.top_n_list("en", 2000)[100:]
RARE = [w for w in wordfreq.top_n_list("en", 60_000)[40_000:] if w.isascii() and w.isalpha()]
SYLLABLES = ["ing", "the", "acc", "ount", "ations", "tion", "pre", "ment", "ly", "ous",
             "qu", "ver", "sta", "ble", "con", "ity", "ane", "ix"]


def _text(rng: random.Random) -> str:
    """Sentences of common words with rare words mixed in, and now and then a run of
    sub-word soup: some texts the detector fires on, most it does not."""
    sentences = []
    for _ in range(rng.randrange(3, 12)):
        pieces = [rng.choice(COMMON) for _ in range(rng.randrange(6, 18))]
        for _ in range(rng.randrange(0, 4)):
            pieces.insert(rng.randrange(len(pieces)), rng.choice(RARE))
        if rng.random() < 0.04:
            at = rng.randrange(len(pieces))
            pieces[at:at] = [rng.choice(SYLLABLES) + rng.choice(SYLLABLES)
                             for _ in range(rng.randrange(3, 14))]
        sentences.append(" ".join(pieces).capitalize() + ".")
    return " ".join(sentences)


def test_the_screen_never_clears_a_text_the_detector_would_fire_on() -> None:
    rng = random.Random(52448)
    fired = cleared = 0
    for _ in range(600):
        text = _text(rng)
        screened = could_fire(text, CFG)
        hit = unknown_words(text, words(text), ("en",), CFG)
        fired += hit is not None
        if screened is not None and "unknown_words" not in screened:
            cleared += 1
            assert hit is None, text
    assert fired >= 30 and cleared >= 200, (fired, cleared)  # both kinds generated


def test_prose_with_rare_but_real_words_is_cleared_without_reading_it() -> None:
    rng = random.Random(7)
    known = language.known_words("en")
    for _ in range(100):
        pieces = [rng.choice(COMMON) for _ in range(60)]
        for at in rng.sample(range(60), 8):  # more than the detector needs, all real
            pieces[at] = rng.choice(RARE)
        text = " ".join(pieces).capitalize() + "."
        assert all(p in known for p in pieces)
        assert "unknown_words" not in (could_fire(text, CFG) or {"unknown_words"})
