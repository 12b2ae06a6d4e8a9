"""Content that shows its reader nothing is no answer (judge.text.visible, verdicts.classify)."""

from __future__ import annotations

import pytest

from loadgen.judge.text.visible import is_blank, without_hidden
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

CFG = VerdictConfig()
LOOP = "Wait, the user wants to upgrade XEHM4B to business, then cancel it. "

INVISIBLE = {
    "zero-width space": "\u200b",
    "zero-width non-joiner": "\u200c",
    "zero-width joiner": "\u200d",
    "word joiner": "\u2060",
    "byte order mark": "\ufeff",
    "soft hyphen": "\u00ad",
    "left-to-right mark": "\u200e",
    "invisible times": "\u2062",
    "Mongolian vowel separator": "\u180e",
    "variation selector": "\ufe0f",
    "combining grapheme joiner": "\u034f",
    "tag character": "\U000e0041",
    "Hangul filler": "\u3164",
    "Hangul choseong filler": "\u115f",
    "Hangul jungseong filler": "\u1160",
    "halfwidth Hangul filler": "\uffa0",
    "Braille blank": "\u2800",
    "ideographic space": "\u3000",
    "NUL": "\x00",
}


def rec(**kw) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", status=200, **kw)


@pytest.mark.parametrize("char", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_invisible_characters_are_blank(char: str) -> None:
    assert char.strip() == char or char.isspace()  # str.strip alone would keep most of them
    assert is_blank(char * 3)
    assert is_blank(f" \n{char}\t{char}")
    assert not is_blank(f"{char}a{char}")  # one visible character is something to read


@pytest.mark.parametrize("visible", ["a", ".", "0", "中", "\u2801", "-", "\u0301x"])
def test_visible_characters_are_not_blank(visible: str) -> None:
    assert not is_blank(visible)
    assert not is_blank("\u200b" + visible)


def test_blank_ranges_of_a_text() -> None:
    text = "\u200b\u2060 Done."
    assert is_blank(text, 0, 3) and not is_blank(text, 0, 4)
    assert is_blank(text, 4, 4)  # an empty range shows nothing


@pytest.mark.parametrize("char", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_a_stuck_reply_with_invisible_content_is_stuck(char: str) -> None:
    r = rec(finish_reason="length", reasoning=LOOP * 40, content=char)
    verdicts = classify(r, CFG)
    assert verdicts[0] == "stuck_in_reasoning", (verdicts, r.findings)
    assert "truncated" not in verdicts


def test_invisible_content_with_a_normal_finish_is_empty_content() -> None:
    r = rec(finish_reason="stop", reasoning="I will think about it.", content="\u200b\ufeff")
    assert classify(r, CFG) == ["empty_content"]


def test_visible_content_after_invisible_characters_is_an_answer() -> None:
    r = rec(finish_reason="length", reasoning="Upgrade first.", content="\u200bSure, I will")
    assert classify(r, CFG) == ["truncated"]


def test_hidden_characters_are_removed_from_inside_words_only() -> None:
    assert without_hidden("re\u200bread\u2060 the\u00ad request\n") == "reread the request\n"
    assert without_hidden("\u3164 \u2800") == " \u2800"  # the Braille blank takes a cell
    plain = "plain ascii text"
    assert without_hidden(plain) is plain
    assert without_hidden("re\x00read\x00") == "reread"
