"""The loop-by-meaning rule (`judge.reply.restatement`) gives what it gave before its
speed-up: every `Restatement` (kind, unit, repeats) and every None the same as the frozen
copy of the code before it (tests/support/restatement_reference.py), and so every
sentence, segment and read on the way, on a generated corpus: honest prose of many
lengths, sentences repeated, loops reworded (synonyms, numbers stepped, an answer written
two to four times, copies under labels), Chinese, Japanese, Korean and Thai, code, lists,
tables, texts with and without sentence ends, cut and finished, under several thresholds,
and the grown corpus of honest replies."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from loadgen.bench.prose import LONG_ANSWER, LONG_REASONING, prose_words
from loadgen.judge.reply import restatement as new
from loadgen.scenario import VerdictConfig
from tests.support import restatement_reference as old
from tests.support.family_sizes import SIZES, sample
from tests.support.legit_corpus import CORPUS, grown_corpus, sample_by_family
from tests.support.legit_families import JA, KO, ZH
from tests.support.restated import BROKEN, HONEST, answer_again

CFG = VerdictConfig()
# Thresholds moved either way: runs shorter and longer, likeness looser and stricter,
# a short tail.
CONFIGS = [CFG] + [CFG.model_copy(update=u) for u in (
    {"restate_min_segments": 3, "restate_ended_min_segments": 4,
     "restate_min_similarity": 0.25, "repeated_answer_min_similarity": 0.4,
     "repeated_answer_min_share": 0.2, "repeated_answer_max_novelty": 0.4},
    {"restate_min_segments": 12, "restate_ended_min_segments": 6,
     "restate_min_similarity": 0.6, "repeated_answer_min_similarity": 0.8,
     "repeated_answer_min_share": 0.6, "repeated_answer_max_novelty": 0.05},
    {"restate_tail_chars": 700, "restate_min_segments": 4, "restate_ended_min_segments": 5},
)]
NOVELTIES = (0.0, 0.05, 0.1, 0.3)
WORDS = prose_words()
PROSE = old.sentences(LONG_REASONING + " " + LONG_ANSWER)
THAI = ["ระบบจะส่งอีเมลยืนยันไปยังเจ้าของบัญชีโดยอัตโนมัติ",
        "กรุณาตรวจสอบแผนของบัญชีก่อนทำการอัปเกรด",
        "เซิร์ฟเวอร์อาจตอบสนองช้าลงเมื่อมีคำขอจำนวนมาก",
        "ผลลัพธ์ของคำขอที่ {n} กลับมาหลังจาก {t} วินาที"]
LABELS = ("Voice {i}:", "## Verse {i}", "Version {i}:", "Answer {i}:", "#### Part {i}")
# Characters where the fast paths could part from the rule as written: case folding
# beyond ASCII, digits beyond ASCII, whitespace the two regex engines read apart
# (\x1c-\x1f), hidden characters, the apostrophe ’, the CJK sentence ends.
ODD = ["Straße", "İstanbul", "ﬁnal", "１２３", "٣٤", "²", "x\x1cy", "a\x1fb", "\x0b", "\r\n",
       "\u200bhid\u200bden", "\x00", "don’t", "it's", "a_b_c", "snake_case_name", "v2.0.1",
       "1,234.50", "-7", "3/4", "e.g.", "U.S.A.", "..", "?!", "…", "—", "“quoted”", "。",
       "！", "？", "；", "\t", "  ", "\n\n", "#", "Label:", "###", "x=4,", "ＡＢＣ", "naïve"]


def _window(rng: random.Random, words: int) -> str:
    start = rng.randrange(len(WORDS))
    return " ".join(WORDS[(start + i) % len(WORDS)] for i in range(words))


def _stepped(rng: random.Random, rounds: int) -> str:
    x, d = rng.randint(-5, 40), rng.choice((1, 2, 3, 7, -1))
    forms = ["Try x = {x}: that gives {f}, not {t}.", "So x = {x} yields {f}?",
             "Check {k}: the value {x},000 is still below {t}.", "Next code AB{x}: rejected.",
             "Then {x}.5 plus {k} makes {f} again."]
    out = []
    for k in range(rounds):
        out.append(rng.choice(forms).format(x=x, f=3 * x + 1, t=1000 + k % 2, k=k))
        x += d
    return " ".join(out)


def _repeated(rng: random.Random, pool: list[str], kinds: int, rounds: int,
              joiner: str) -> str:
    chosen = rng.sample(pool, min(kinds, len(pool)))
    out = []
    for _ in range(rounds):
        if rng.random() < 0.3:
            rng.shuffle(chosen)
        out.extend(s.format(n=rng.randint(1, 99), t=rng.randint(1, 9), i=1) for s in chosen)
    return joiner.join(out)


def _labelled(rng: random.Random) -> str:
    text = answer_again(rng.randrange(1000), rng.choice((600, 1200)), rng.randint(2, 4))[1]
    copies = text.split("\n\n") if "\n\n" in text else [text]
    label = rng.choice(LABELS)
    return "\n\n".join(f"{label.format(i=i + 1)}\n{c}" for i, c in enumerate(copies))


def _fuzz(rng: random.Random, n: int) -> str:
    pool = [*WORDS[:200], *ODD, "7", "12", "2026-12-01", "x", "is", "of", *ZH[:3], *THAI]
    parts = []
    for _ in range(n):
        parts.append(rng.choice(pool))
        parts.append(rng.choice((" ", " ", " ", ". ", ", ", "\n", "! ", "? ", "", "。")))
    return "".join(parts)


def texts() -> Iterator[tuple[str, str]]:
    """(family, text) of the generated corpus."""
    rng = random.Random(20261206)
    for words in (3, 8, 20, 40, 64, 120, 250, 500, 1016):
        for _ in range(2):
            text = _window(rng, words)
            yield "prose", text
            yield "prose", text.rstrip(".!? ") + "."
            yield "prose", text.rstrip(".!? ")
    yield "stub", " ".join(WORDS[i % len(WORDS)] for i in range(1016)) + " "
    for family, make in BROKEN.items():
        for seed in range(4):
            for chars in (300, 1000, 2000, 5000):
                yield family, make(seed, chars)[1]
    for seed in range(8):
        for copies in (2, 3, 4):
            yield "answer again", answer_again(seed, rng.choice((500, 1000, 1600)), copies)[1]
    for family, honest in HONEST.items():
        for seed in range(3):
            for chars in (500, 2500):
                reply = honest(seed, chars)
                yield family, reply.reasoning
                yield family, reply.content
    for _ in range(12):
        yield "stepped", _stepped(rng, rng.randint(5, 60))
        yield "labelled", _labelled(rng)
        yield "repeated", _repeated(rng, PROSE, rng.randint(1, 6), rng.randint(2, 8),
                                    rng.choice((" ", "\n", "\n\n")))
        yield "zh", _repeated(rng, ZH, rng.randint(1, 6), rng.randint(1, 8), rng.choice(("", "\n")))
        yield "ja ko", _repeated(rng, rng.choice((JA, KO)), rng.randint(2, 5),
                                 rng.randint(1, 6), rng.choice(("", " ", "\n")))
        yield "th", _repeated(rng, THAI, rng.randint(1, 4), rng.randint(1, 8),
                              rng.choice((" ", "\n", ". ")))
        yield "mixed", _repeated(rng, PROSE[:20] + ZH + THAI, rng.randint(3, 8),
                                 rng.randint(1, 5), rng.choice((" ", "\n")))
    for _ in range(80):
        yield "fuzz", _fuzz(rng, rng.randint(1, 160))
    for reply in CORPUS:
        yield reply.name, reply.reasoning
        yield reply.name, reply.content


def _grown() -> Iterator[tuple[str, str]]:
    for reply in sample_by_family(grown_corpus(2), 1):
        for text in (reply.reasoning, reply.content):
            if text:  # the last 2,500 characters: the corpus is large
                yield "grown " + reply.name.split(" (")[0], text[-2500:]


def _result(r: Any) -> tuple[str, str, int] | None:
    return None if r is None else (r.kind, r.unit, r.repeats)


def _segs(segs: list[Any]) -> list[tuple[Any, ...]]:
    return [(s.text, s.words, s.numbers, s.labelled) for s in segs]


def _reads(reads: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.similarity, r.new, r.words, r.meaning, r.match) for r in reads]


def compare(text: str, values: list[str], rng: random.Random) -> tuple[int, int]:
    """Asserts the rule and each step agree with the reference on the text: its
    sentences, their words, its segments, its reads, and the results under the default
    thresholds (cut and finished, two novelty thresholds) and two other draws of
    thresholds, cut and novelty, and the judge unscreened under one more. Returns
    (results compared, loops found)."""
    said = old.sentences(text)
    assert new.sentences(text) == said
    for sentence in said:
        assert new._tokens(sentence) == old._tokens(sentence), sentence
    segs = old.segments(said)
    assert _segs(new.segments(said)) == _segs(segs) == _segs(new.segments(text))
    if segs:
        frozen = frozenset(values)
        assert _reads(new._read(new.segments(said), 0.4, frozen)) == \
            _reads(old._read(segs, 0.4, frozen))
    draws = [(CFG, cut, novelty) for cut in (False, True) for novelty in (0.05, 0.1)]
    draws += [(rng.choice(CONFIGS), rng.random() < 0.5, rng.choice(NOVELTIES))
              for _ in range(2)]
    compared = found = 0
    for cfg, cut, novelty in draws:
        assert new.screen(text, cfg, cut=cut) == old.screen(text, cfg, cut=cut)
        got = _result(new.find_restatement(text, cfg, cut=cut, min_novelty=novelty,
                                           request_values=values))
        assert got == _result(old.find_restatement(
            text, cfg, cut=cut, min_novelty=novelty, request_values=values)), \
            (text[:200], cut, novelty)
        compared += 1
        found += got is not None
    # The judge unscreened too (what the screen would have stopped).
    cfg, cut, novelty = rng.choice(CONFIGS), rng.random() < 0.5, rng.choice(NOVELTIES)
    got = _result(new.judge(said, cfg, cut=cut, min_novelty=novelty, request_values=values))
    assert got == _result(old.judge(said, cfg, cut=cut, min_novelty=novelty,
                                    request_values=values))
    return compared + 1, found + (got is not None)


def _values(rng: random.Random, text: str) -> list[str]:
    """Request values: none, or some of the text's own numbers (a template's rows)."""
    if rng.random() < 0.5:
        return []
    numbers = old.request_numbers([{"role": "user", "content": text}])
    return rng.sample(numbers, len(numbers) // 2)


@pytest.mark.parametrize("step", SIZES)
def test_the_rule_gives_what_it_gave_before(step: int) -> None:
    rng = random.Random(7)
    compared = found = inputs = 0
    for _, text in sample([*texts(), *_grown()], step):
        c, f = compare(text, _values(rng, text), rng)
        inputs += 1
        compared += c
        found += f
    # Not a vacuous corpus: many inputs, loops found in many of them.
    assert inputs >= 700 // step and compared >= 5_000 // step and found >= 300 // step, \
        (inputs, compared, found)
    print(f"\n{inputs} texts, {compared} results compared, {found} loops found")


def test_a_text_of_more_words_than_the_masks_take_is_read_as_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Past `_WORD_IDS` words the reads come from `_read_hashed`, the rule as first
    # written; made small here, so the corpus goes through it.
    monkeypatch.setattr(new, "_WORD_IDS", 0)
    for _, text in list(texts())[::4]:
        segs = old.segments(old.sentences(text))
        if segs:
            assert _reads(new._read(new.segments(text), 0.4, frozenset())) == \
                _reads(old._read(segs, 0.4, frozenset()))


def test_no_hash_value_wraps_round_below_the_linear_ids() -> None:
    # `_read` reads a segment's MinHash values as those of its least word id: true while
    # every id it gives out is at most `_LINEAR_IDS`.
    assert new._WORD_IDS <= new._LINEAR_IDS
    x = new._LINEAR_IDS
    assert all(a * x + b < new._PRIME for a, b in new._HASHES)
    assert any(a * (x + 1) + b >= new._PRIME for a, b in new._HASHES)


def test_the_kinds_are_both_found() -> None:
    kinds = {r.kind for r in (
        new.find_restatement(text, CFG, cut=cut, min_novelty=0.1)
        for family, text in texts() if family in BROKEN or family == "answer again"
        for cut in (False, True)) if r is not None}
    assert kinds == {"restatement", "repeated answer"}


def test_sentences_and_words_are_read_as_before_character_by_character() -> None:
    # Random strings over the characters where the fast paths could part from the rule:
    # sentence ends (ASCII and CJK), whitespace both engines read (and \x1c-\x1f, which
    # only `re` calls whitespace), the token's joiners, digits, case, scripts.
    alphabet = [*"aZx_9 0.!?,/'-:#\n\t\r\x0b\x1c\x1f", "’", "。", "！", "？", "；", "…",
                "ß", "İ", "１", "²", "中", "文", "ก", "ข", "\u200b", "\x00", "é", "Ж"]
    rng = random.Random(11)
    for n in range(10_000):
        weights = [rng.random() for _ in alphabet]
        text = "".join(rng.choices(alphabet, weights, k=rng.randint(0, 60)))
        if n % 2:
            text = text.encode("ascii", "ignore").decode()
        said = old.sentences(text)
        assert new.sentences(text) == said, text
        for piece in (text, *said):
            assert new._tokens(piece) == old._tokens(piece), piece
        assert _segs(new.segments(text)) == _segs(old.segments(text)), text
