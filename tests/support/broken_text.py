"""Families of broken replies the judge was not tuned on, generated with varied values.

Each family is a class of output a broken server writes with a clean finish; a seed
varies its vocabulary, lengths, layout and where it sits in the reply (reasoning,
content, a tool argument). Word lists come from `wordfreq` (the same package the judge
reads, but other words: the families draw from whole vocabularies, never from a list the
rules were written against).

- real_words_shuffled: real words in random order, uniform over a vocabulary, in
  Zipf's proportions, or a real answer's own words shuffled; capitals and full stops
  sprinkled or not;
- words_with_foreign_words: real English words alternating with real words of other
  languages and scripts, a space apart;
- latin_subword_soup: pieces of real words (2 to 5 letters), some glued, some a space
  apart (the byte-level BPE pieces of a vocabulary, decoded in random order);
- under_thresholds: salad made of pieces that each stay under one detector's threshold
  (three special tokens where four make a burst, three script switches where four do,
  glued runs shorter than a glued run, spaced letters shorter than a chain);
- other_language: a fluent answer in another language than the request's;
- cut_mid_sentence: an honest answer cut off mid-sentence (at a word or inside one)
  that still finished with `stop`;
- ramble: fluent prose that runs until max_tokens (`length`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path

import wordfreq

HONEST_TEXT = Path(__file__).resolve().parents[1] / "fixtures" / "honest_text" / "passages.json"
BOS = "<｜begin▁of▁sentence｜>"

#: Answers a healthy billing assistant gives, templates filled with varied values.
ANSWER_SENTENCES = (
    "I moved account {acc} to the {plan} plan, and the change took effect immediately.",
    "The account {acc} has {seats} seats and renews on {date}, so the new price applies "
    "from the next invoice.",
    "Before cancelling, I need to know whether you want it to end now or at the end of "
    "the current term.",
    "Your last invoice was {amount} dollars, which includes the prorated charge for the "
    "upgrade.",
    "If you change your mind, the plan can be switched back at any time without a fee.",
    "The billing history shows steady usage of storage and egress over the past year.",
    "I have not cancelled anything yet, because cancellations cannot be undone.",
    "Let me know which of the two options you prefer, and I will take care of the rest.",
    "The owner of the account, {owner}, will receive a confirmation email shortly.",
    "According to the contract {contract}, the discount ends after twelve months.",
)
PLANS = ("free", "pro", "business", "enterprise")


def _rng(family: str, seed: int) -> random.Random:
    return random.Random(f"broken/{family}/{seed}")


def _code(rng: random.Random) -> str:
    while True:
        code = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))
        if any(c.isdigit() for c in code) and any(c.isalpha() for c in code):
            return code


def honest_answer(rng: random.Random, sentences: int) -> str:
    """A fluent billing answer of `sentences` sentences."""
    picked = rng.sample(ANSWER_SENTENCES, min(sentences, len(ANSWER_SENTENCES)))
    return " ".join(s.format(acc=_code(rng), plan=rng.choice(PLANS), seats=rng.randint(2, 90),
                             date=f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                             amount=f"{rng.randint(10, 9000)}.{rng.randint(0, 99):02d}",
                             owner=f"ops{rng.randint(1, 99)}@example.com",
                             contract=f"NW{rng.randint(0, 999999):06d}") for s in picked)


@cache
def vocabulary(lang: str, size: int) -> tuple[str, ...]:
    """The `size` most frequent words of a language that are letters only."""
    return tuple(w for w in wordfreq.top_n_list(lang, size) if w.isalpha())


@cache
def _zipf_vocabulary(lang: str) -> tuple[tuple[str, ...], tuple[float, ...]]:
    words = vocabulary(lang, 30000)
    return words, tuple(wordfreq.word_frequency(w, lang) for w in words)


def _sentences(rng: random.Random, words: list[str]) -> str:
    """Words with capitals and full stops every 6 to 16 words, commas now and then."""
    out, since = [], 0
    for word in words:
        if since == 0:
            word = word[:1].upper() + word[1:]
        since += 1
        if since >= rng.randint(6, 16):
            word += "."
            since = 0
        elif rng.random() < 0.06:
            word += ","
        out.append(word)
    return " ".join(out).rstrip(",") + ("" if out and out[-1].endswith(".") else ".")


def real_words_shuffled(seed: int, words: int) -> str:
    rng = _rng("shuffled", seed)
    variant = seed % 4
    if variant == 0:  # uniform over a vocabulary of 1,000 to 30,000 words
        vocab = vocabulary("en", rng.choice((1000, 5000, 30000)))
        picked = [rng.choice(vocab) for _ in range(words)]
    elif variant == 1:  # in the language's own proportions (function words included)
        vocab, weights = _zipf_vocabulary("en")
        picked = rng.choices(vocab, weights, k=words)
    else:  # a real answer's words, shuffled
        answer = honest_answer(rng, max(2, words // 12)).split()
        while len(answer) < words:
            answer += honest_answer(rng, 2).split()
        picked = answer[:words]
        rng.shuffle(picked)
        picked = [w.strip(".,").lower() for w in picked]
    return _sentences(rng, picked) if rng.random() < 0.5 else " ".join(picked)


FOREIGN_LANGUAGES = ("ru", "zh", "ar", "ko", "ja", "el", "he", "hi", "uk", "fa")


def words_with_foreign_words(seed: int, words: int) -> str:
    rng = _rng("foreign", seed)
    english = vocabulary("en", 5000)
    others = rng.sample(FOREIGN_LANGUAGES, rng.randint(1, 4))
    every = rng.choice((2, 2, 3))
    out = []
    for i in range(words):
        if i % every == every - 1:
            out.append(rng.choice(vocabulary(rng.choice(others), 3000)))
        else:
            out.append(rng.choice(english))
    return " ".join(out)


def latin_subword_soup(seed: int, words: int) -> str:
    rng = _rng("soup", seed)
    vocab = vocabulary("en", 20000)
    glue = rng.uniform(0.2, 0.6)
    pieces = []
    while len(pieces) < words * 2:
        word = rng.choice(vocab)
        if len(word) < 4:
            continue
        cut = rng.randint(2, min(5, len(word) - 1))
        pieces += [word[:cut], word[cut:]]
    rng.shuffle(pieces)
    text = ""
    for piece in pieces[:words * 2]:
        text += piece if rng.random() < glue and text else " " + piece
    return text.strip()


def under_thresholds(seed: int, words: int) -> str:
    """Salad spread so that no detector alone sees its threshold: each stretch holds two
    or three markers (replacement characters, mojibake: four make a burst), two or three
    script switches (four do), a glued run of 20 to 28 letters (32 make one) and 10 to 16
    spaced letters (24 make a chain), the stretches far enough apart that no window holds
    two of one kind."""
    rng = _rng("under", seed)
    english = vocabulary("en", 3000)
    out = []
    while sum(len(p.split()) for p in out) < words:
        pieces = [
            # markers a leak rule does not see: replacement characters, mojibake
            "".join(rng.choice(("\ufffd", "Ã©", "â€™", "Ã¼")) for _ in range(rng.randint(2, 3))),
            "".join(rng.choice(vocabulary(s, 500))[:3]
                    for s in rng.sample(FOREIGN_LANGUAGES, rng.randint(2, 3))),
            "".join(rng.choice(english) for _ in range(8))[:rng.randint(20, 28)],
            " ".join("".join(rng.choice(english) for _ in range(4))[:rng.randint(10, 16)]),
        ]
        rng.shuffle(pieces)
        out.append(" ".join(pieces))
        out.append(honest_answer(rng, 2))  # about 200 characters apart
    return " ".join(out)


@cache
def honest_passages() -> dict[str, list[str]]:
    """Honest text by language (tests/fixtures/honest_text)."""
    corpus = json.loads(HONEST_TEXT.read_text())
    return {lang: [p["text"] for p in entry["passages"]] for lang, entry in corpus.items()}


LATIN_OTHERS = ("fr", "de", "es", "pl", "vi", "tr")


def other_language(seed: int, words: int) -> str:
    """A fluent answer in a language the English request never used."""
    rng = _rng("other_language", seed)
    lang = rng.choice((*LATIN_OTHERS, "ru", "uk", "el", "ko", "ja", "zh"))
    text = rng.choice(honest_passages()[lang])
    return text[:max(200, words * 6)]


def cut_mid_sentence(seed: int, words: int) -> str:
    """An honest answer cut off inside its last sentence."""
    rng = _rng("cut", seed)
    answer = honest_answer(rng, max(2, words // 14))
    last = answer.rstrip(".").rfind(". ") + 2
    cut = rng.randint(last + 8, len(answer) - 3)
    if seed % 2:  # at a word's edge
        cut = answer.rfind(" ", 0, cut)
    return answer[:cut].rstrip(" ,")


def ramble(seed: int, words: int) -> str:
    """Fluent prose that does not stop (ends where max_tokens cut it)."""
    rng = _rng("ramble", seed)
    text = honest_answer(rng, max(4, words // 10))
    return text[:rng.randint(len(text) // 2, len(text))]


TEXT_FAMILIES: dict[str, Callable[[int, int], str]] = {
    "real_words_shuffled": real_words_shuffled,
    "words_with_foreign_words": words_with_foreign_words,
    "latin_subword_soup": latin_subword_soup,
    "under_thresholds": under_thresholds,
}
