"""`garbled` at the edges its keys allow: a window exactly at a threshold, salad as
short as a detector can read it, a combining mark on a text's first letter.

The ASCII path screens each detector with a cheap necessary condition; a screen a hair
too tight would hide salad that the detector behind it flags, and only at these edges
(a user lowers a window or raises another detector's threshold), so each is shown here
on the verdict.
"""

from __future__ import annotations

import string

import pytest

from loadgen.judge.reply.garbled import garble_in_text
from loadgen.scenario import VerdictConfig
from tests.loadgen.judge.reply.test_garbled import noise

GLUED = "thequickbrownfoxjumpsoverthelazydogwhilepackingmyboxwithfivedozenliquorjugs"


def kind_of(text: str, **cfg: object) -> str | None:
    found = garble_in_text(text, frozenset(), VerdictConfig(**cfg))  # type: ignore[arg-type]
    return found[0] if found else None


@pytest.mark.parametrize("seed", range(4))
def test_a_window_with_exactly_the_punctuation_share_asked_is_noise(seed: int) -> None:
    # The share is "at least": a window holding exactly share x window characters of
    # punctuation is noise, one short of it is not. The first character is punctuation:
    # it counts as any other.
    text = "#" + noise(191, seed)
    marks = sum(c in string.punctuation for c in text)
    share = marks / len(text)
    assert share * len(text) == marks  # the threshold lands on the count itself
    assert kind_of(text, garbled_noise_min_symbol_share=share) == "noise"
    assert kind_of(text, garbled_noise_min_symbol_share=(marks + 1) / len(text)) is None


@pytest.mark.parametrize("run", [16, 20, 24])
def test_a_reply_glued_whole_is_salad_as_short_as_three_runs(run: int) -> None:
    # One run three times the shortest counts three runs: 3 x run letters and nothing
    # else are salad, however high the other detectors' keys (a chain of 40 spaced
    # letters needs 79 characters), and one letter fewer is not.
    keys = {"garbled_glued_run_letters": run, "garbled_glued_letters": 3 * run,
            "garbled_spaced_letters": 40}
    assert kind_of(GLUED[:3 * run], **keys) == "glued_fragments"
    assert kind_of(GLUED[:3 * run - 1], **keys) is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noise_as_short_as_its_window_is_caught(seed: int) -> None:
    # A 32-character noise window (its least) with the glued runs at 40: the noise is
    # shorter than any other detector's reach and is still judged.
    keys = {"garbled_noise_window_chars": 32, "garbled_noise_min_bits": 4.5,
            "garbled_glued_run_letters": 40}
    assert kind_of(noise(32, seed), **keys) == "noise"
    assert kind_of(noise(31, seed), **keys) is None


def test_a_combining_mark_on_the_first_letter_takes_its_script() -> None:
    # Cyrillic glued to Greek four times is salad; an accent (U+0301) on the first
    # letter is part of that letter, so its switch to Greek still counts.
    plain = "жλ and жλ and жλ and жλ"
    accented = "ж\u0301" + plain[1:]
    for text in (plain, accented):
        found = garble_in_text(text, frozenset(), VerdictConfig())
        assert found is not None and found[0] == "scripts"
        assert found[1].startswith("4 switches")
    assert kind_of(accented[:accented.rindex(" and")]) is None  # three switches
