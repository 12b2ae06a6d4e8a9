"""The language rules on generated families (tests/support/language_families.py): whole
answers in scripts written without spaces, languages named by any of their names and
aliases, and two honest shapes that tripped the judge (Chinese and Japanese teaching
Russian words, French typography's no-break spaces). Each family counts its false
alarms and false cleans over every variant; docs/testing.md states the counts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from loadgen.judge.language_names import equivalents, named
from tests.loadgen.test_judge_families import serve
from tests.support import broken_servers
from tests.support import language_families as lf
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
    ("Reply in Spanglish.", {"es", "en"}),
    ("What should I check before the upgrade?", set()), ("I live in Germany.", set())])
def test_a_language_is_named_by_any_of_its_names(text: str, codes: set[str]) -> None:
    assert named(text)[0] == codes


def test_macrolanguage_members_are_one_language() -> None:
    assert equivalents("nb") == equivalents("nn") == {"nb", "nn"}
    assert {"hr", "bs", "sr"} <= equivalents("hr")
    assert equivalents("en") == {"en"} and "ru" not in equivalents("uk")


#: Measured over the family (docs/testing.md); what is left is named below.
NAMED_FALSE_ALARMS = 20  # "castellano" is not found among the library's names
NAMED_FALSE_CLEANS = 290  # answers whose prose runs break on paths and code


def test_named_languages_allow_their_answers_and_no_other() -> None:
    honest, wrong = lf.named_family()
    assert len(honest) >= 2000 and len(wrong) >= 2000
    assert len(_alarms(honest)) <= NAMED_FALSE_ALARMS
    assert len(_cleans(wrong)) <= NAMED_FALSE_CLEANS


def test_teaching_russian_in_chinese_or_japanese_is_ok() -> None:
    cases = lf.teach_russian_spaced()
    assert len(cases) >= 100 and any(" привет " in c.content or " дом " in c.content
                                     for c in cases)
    assert _alarms(cases) == []


def test_french_no_break_spaces_are_ok() -> None:
    cases = lf.french_spacing()
    assert all("\u00a0" in c.content or "\u202f" in c.content for c in cases)
    assert _alarms(cases) == []


def test_served_end_to_end_unspaced_wrong_fails_and_honest_passes(fake_server,
                                                                   tmp_path: Path) -> None:
    honest, wrong = lf.unspaced_family(seeds=2)
    rng = random.Random(0)
    for cases, expect in ((rng.sample(wrong, 6), 1), (rng.sample(honest, 6), 0)):
        folder = tmp_path / str(expect)
        folder.mkdir()
        replay = broken_servers.honest_replay(folder / "bodies.jsonl", cases)
        scenario = {"load": {"concurrency": 3, "measurement": len(cases)},
                    "request": {"max_tokens": 4096},
                    "workload": {"kind": "replay", "path": str(replay)},
                    "gate": {"prove_below": 0.5}}
        code, summary = serve(fake_server, folder, broken_servers.replay_script(cases),
                              scenario)
        verdicts = summary["phases"]["measurement"]["verdicts"]
        assert code == expect, verdicts
        if expect:
            assert verdicts.get("wrong_language", 0) == len(cases)
