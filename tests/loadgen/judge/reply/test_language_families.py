"""The language rules on generated families (tests/support/language_families.py): whole
answers in scripts written without spaces, languages named by any of their names and
aliases, and two honest shapes that tripped the judge (Chinese and Japanese teaching
Russian words, French typography's no-break spaces). Each family counts its false
alarms and false cleans over every variant; docs/testing.md states the counts."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from loadgen.judge.text.language_names import equivalents, named
from tests.loadgen.judge.reply.test_judge_families import serve
from tests.support import broken_servers
from tests.support import language_families as lf
from tests.support.family_sizes import SIZES, sample
from tests.support.honest_requests import Case, judged


def _alarms(cases: list[Case]) -> list[tuple[str, list[str]]]:
    return [(c.name, r.verdicts) for c in cases if (r := judged(c)).verdicts != ["ok"]]


def _cleans(cases: list[Case]) -> list[str]:
    return [c.name for c in cases if "wrong_language" not in judged(c).verdicts]


def test_unspaced_answers_get_the_language_test_both_ways() -> None:
    honest, wrong = lf.unspaced_family()
    assert len(honest) >= 200 and len(wrong) >= 200
    assert _alarms(honest) == []
    assert _cleans(wrong) == []


@pytest.mark.parametrize(("text", "codes"), [
    ("Please answer in Norwegian.", {"nb"}), ("Bokmål, takk.", {"nb"}),
    ("Svar på nynorsk.", {"nn"}), ("Reply in Flemish.", {"nl"}),
    ("In Valencian, please.", {"ca"}), ("Answer in Moldovan.", {"ro"}),
    ("用法语回答", {"fr"}), ("Réponds en français.", {"fr"}), ("Antworte auf Deutsch.", {"de"}),
    ("Ответь на русском.", {"ru"}), ("请用Dutch回答", {"nl"}),
    ("What should I check before the upgrade?", set()), ("I live in Germany.", set())])
def test_a_language_is_named_by_any_of_its_names(text: str, codes: set[str]) -> None:
    assert named(text)[0] == codes


def test_macrolanguage_members_are_one_language() -> None:
    assert equivalents("nb") == equivalents("nn") == {"nb", "nn"}
    assert {"hr", "bs", "sr"} <= equivalents("hr")
    assert equivalents("en") == {"en"} and "ru" not in equivalents("uk")


@pytest.mark.parametrize("step", SIZES)
def test_named_languages_allow_their_answers_and_no_other(step: int) -> None:
    honest, wrong = lf.named_family()
    assert len(honest) >= 2000 and len(wrong) >= 2000
    assert _alarms(sample(honest, step)) == []
    assert _cleans(sample(wrong, step)) == []


#: Endonyms and everyday names, each in a request of its own language and in English.
ENDONYMS = {"castellano": "es", "español": "es", "castellà": "es", "català": "ca",
            "valencià": "ca", "Deutsch": "de", "Hochdeutsch": "de", "polski": "pl",
            "norsk": "nb", "suomi": "fi", "русский": "ru", "українська": "uk",
            "中文": "zh", "汉语": "zh", "漢語": "zh", "華語": "zh", "國語": "zh", "日本語": "ja",
            "ภาษาไทย": "th", "한국어": "ko", "Türkçe": "tr", "Nederlands": "nl",
            "moldovenească": "ro", "română": "ro", "فارسی": "fa", "עברית": "he",
            "Ελληνικά": "el", "Tiếng Việt": "vi", "हिन्दी": "hi", "Schwiizertüütsch": "de"}


@pytest.mark.parametrize(("name", "code"), sorted(ENDONYMS.items()))
def test_an_endonym_names_its_language(name: str, code: str) -> None:
    for text in (f"Please answer in {name}.", f"{name}: {lf.QUESTION}", f"请用{name}回答"):
        assert named(text)[0] == {code}, text


@pytest.mark.parametrize("word", ["galego", "check", "Germany", "checkout", "Hindi"])
def test_a_word_that_is_another_name_names_nothing_it_only_begins_like(word: str) -> None:
    """"galego" is Galician (which the judge cannot tell), not Spanish's "galés" (Welsh)
    with an ending; "Hindi" names Hindi, not Hinglish (no mix with English)."""
    found, mixed = named(f"Answer in {word}.")
    assert not mixed and found <= {"hi"} and ("cy" not in found)


def test_code_switching_is_neither_garbled_nor_wrong_and_a_third_language_is() -> None:
    """Hinglish, Spanglish, Taglish and Swiss German answers to requests that name the
    mix or are written in it pass; the same requests answered wholly in another
    language (Russian among them) are wrong_language."""
    honest, wrong = lf.code_switch_family()
    assert len(honest) >= 96 and len(wrong) >= 192
    assert sum(c.name.endswith("-> ru") for c in wrong) >= 96
    assert _alarms(honest) == []
    assert _cleans(wrong) == []


@pytest.mark.parametrize(("text", "codes"), [
    ("Reply in Spanglish.", {"es", "en"}), ("Taglish please", {"tl", "en"}),
    ("Antworte auf Denglisch.", {"de", "en"}), ("Konglish, please.", {"ko", "en"}),
    ("Reply in Hinglish.", {"hi", "en"})])
def test_a_blend_with_english_names_both_and_a_mix(text: str, codes: set[str]) -> None:
    assert named(text) == (codes, True)


def test_teaching_russian_in_chinese_or_japanese_is_ok() -> None:
    cases = lf.teach_russian_spaced()
    assert len(cases) >= 100 and any(" привет " in c.content or " дом " in c.content
                                     for c in cases)
    assert _alarms(cases) == []


def test_french_no_break_spaces_are_ok() -> None:
    cases = lf.french_spacing()
    assert all("\u00a0" in c.content or "\u202f" in c.content for c in cases)
    assert _alarms(cases) == []


def _served(fake_server: Any, folder: Path, cases: list[Any]) -> tuple[int, dict[str, int]]:
    """The cases replayed through a whole run against the scripted server: its exit code
    and the measurement's verdict counts."""
    folder.mkdir()
    replay = broken_servers.honest_replay(folder / "bodies.jsonl", cases)
    scenario = {"load": {"concurrency": 3, "measurement": len(cases)},
                "request": {"max_tokens": 4096},
                "workload": {"kind": "replay", "path": str(replay)},
                "gate": {"prove_below": 0.5}}
    code, summary = serve(fake_server, folder, broken_servers.replay_script(cases), scenario)
    return code, summary["phases"]["measurement"]["verdicts"]


def test_served_end_to_end_unspaced_wrong_fails_and_honest_passes(fake_server,
                                                                   tmp_path: Path) -> None:
    honest, wrong = lf.unspaced_family(seeds=2)
    rng = random.Random(0)
    for cases, expect in ((rng.sample(wrong, 6), 1), (rng.sample(honest, 6), 0)):
        code, verdicts = _served(fake_server, tmp_path / str(expect), cases)
        assert code == expect, verdicts
        if expect:
            assert verdicts.get("wrong_language", 0) == len(cases)


#: Separators running text may have: Arabic's comma, semicolon and question mark,
#: Devanagari's danda, Persian's zero-width non-joiner inside a word, and plain spaces.
ARABIC_LETTERS = "ابتثجحخدذرزسشصضطظعغفقكلمنهوي"
DEVANAGARI_LETTERS = "कखगघचछजझटठडढतथदधनपफबभमयरलवशसह"


@pytest.mark.parametrize("seed", range(60))
def test_running_text_goes_on_across_arabic_punctuation_and_persian_joiners(seed: int
                                                                            ) -> None:
    from loadgen.judge.reply.garbled.words import runs, words

    rng = random.Random(f"gaps/{seed}")
    letters, seps = rng.choice(((ARABIC_LETTERS, (" ", "، ", "؛ ", "؟ ", "\u200c")),
                                (DEVANAGARI_LETTERS, (" ", "। ", "॥ ", ", "))))
    count = rng.randint(12, 30)
    text = "".join("".join(rng.choices(letters, k=rng.randint(2, 7)))
                   + (rng.choice(seps) if k < count - 1 else "") for k in range(count))
    found = words(text)
    assert list(runs(found, 12)) == [(0, len(found))], text


def test_served_end_to_end_code_switching_passes_and_russian_to_it_fails(
        fake_server, tmp_path: Path) -> None:
    honest, wrong = lf.code_switch_family(seeds=2)
    rng = random.Random(0)
    russian = [c for c in wrong if c.name.endswith("-> ru")]
    for cases, expect in ((rng.sample(russian, 6), 1), (rng.sample(honest, 6), 0)):
        code, verdicts = _served(fake_server, tmp_path / str(expect), cases)
        assert code == expect, verdicts
        if expect:
            assert verdicts.get("wrong_language", 0) == len(cases)
