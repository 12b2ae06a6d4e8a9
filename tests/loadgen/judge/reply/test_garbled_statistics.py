"""The `shuffled_words` and `noise` detectors of `garbled` at their edges: what counts as
running text (one or two spaces, not three, not commas; CJK characters with nothing
between), words told apart whatever their case or however alike, and random strings
one to a line (a list, a format) against noise in running text."""

from __future__ import annotations

import random
import string

import pytest

from loadgen.judge.reply.garbled import garble_in_text
from loadgen.scenario import VerdictConfig
from tests.loadgen.judge.reply.test_garbled import PROSE, VOCAB, noise, shuffled_words


def kind_of(text: str) -> str | None:
    found = garble_in_text(text, frozenset(), VerdictConfig())
    return found[0] if found else None


WORDS = shuffled_words(VOCAB, 40)


def test_words_one_or_two_spaces_apart_are_running_text_and_three_are_not() -> None:
    assert kind_of(" ".join(WORDS)) == "shuffled_words"
    assert kind_of("  ".join(WORDS)) == "shuffled_words"
    assert kind_of("   ".join(WORDS)) is None  # columns laid out with spaces
    assert kind_of(",".join(WORDS)) is None  # a CSV row


def test_the_first_word_need_not_be_followed_by_a_space() -> None:
    assert kind_of("Note: " + " ".join(WORDS)) == "shuffled_words"


def test_words_are_the_same_whatever_their_case() -> None:
    # "Account", "ACCOUNT" and "account" are one word of the handful (in ASCII text and
    # in text with other characters).
    cased = [w.upper() if i % 3 == 0 else w.capitalize() if i % 3 == 1 else w
             for i, w in enumerate(WORDS)]
    assert kind_of(" ".join(cased)) == "shuffled_words"
    assert kind_of("Übersicht: " + " ".join(cased)) == "shuffled_words"


def test_words_alike_but_for_a_letter_are_different_words() -> None:
    # Same length, same first and last letters: eight words, not one.
    family = "bat bet bit bot but bad bed bid".split()
    assert kind_of(" ".join(shuffled_words(family, 40))) == "shuffled_words"
    # Pairs that share their middle letter too: six words, not three.
    pairs = "paper piper later liter baker biker".split()
    assert kind_of(" ".join(shuffled_words(pairs, 40))) == "shuffled_words"
    # Anagrams whose middle letters trade places (same length, ends, letters): eight
    # words, not four.
    swapped = "garden garedn silver silevr window winodw castle caslte".split()
    assert kind_of(" ".join(shuffled_words(swapped, 40))) == "shuffled_words"


def test_a_handful_of_chinese_characters_shuffled_is_salad() -> None:
    # Each CJK character is a word; running text has nothing between them.
    assert kind_of("".join(shuffled_words(list("的是不了人我在有"), 40))) == "shuffled_words"


def keys(count: int, length: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + string.punctuation
    return ["".join(rng.choices(alphabet, k=length)) for _ in range(count)]


def test_noise_between_lines_of_prose_is_noise() -> None:
    assert kind_of(PROSE + "\n" + noise(240) + "\n" + PROSE) == "noise"


def test_two_strings_on_two_lines_are_a_list_and_on_one_line_noise() -> None:
    two = keys(2, 150)
    assert kind_of("Keys:\n" + "\n".join(two)) is None
    assert kind_of("Keys:\n" + " ".join(two)) == "noise"


def test_keys_next_to_a_sentence_are_a_list() -> None:
    # Generated keys one to a line with a sentence before or after them: a format.
    assert kind_of("Keys:\n\n" + "\n".join(keys(6, 64))) is None  # a short title: fine
    assert kind_of(PROSE + "\n\n" + "\n".join(keys(6, 64))) is None
    assert kind_of("Keys:\n\n" + "\n".join(keys(6, 64)) + "\n\n" + PROSE) is None


def ragged_lines(count: int, seed: int) -> list[str]:
    """Noise broken into lines where a garbled decode happened to emit a newline: lines
    of lengths as random as their characters."""
    rng = random.Random(seed)
    return [noise(rng.randint(30, 120), seed=seed * 100 + i) for i in range(count)]


def test_noise_lines_interleaved_with_sentences_are_noise() -> None:
    # The list rule must not be a way out: lines of one string each between sentences,
    # of lengths that vary as noise does, are noise, two or three at a time (a single
    # line shorter than a window, diluted by the prose around it, is too little noise
    # for any window, list or not).
    sentence = PROSE.strip()
    for per in (2, 3):
        lines = [x for i in range(4) for x in [sentence, *ragged_lines(per, 10 * per + i)]]
        assert kind_of("\n".join(lines)) == "noise", per
        assert kind_of("\n\n".join(lines)) == "noise", per


def test_numbered_keys_before_a_sentence_are_a_list() -> None:
    # "9. `key`" and "10. `key`" differ by a character: still one list.
    numbered = [f"{i + 1}. `{key}`" for i, key in enumerate(keys(12, 40))]
    assert kind_of("Keys:\n" + "\n".join(numbered) + "\n" + PROSE) is None


def test_strings_of_lengths_two_apart_next_to_a_sentence_are_no_list() -> None:
    # Strings one to a line whose lengths step by two are no list of one format: beside
    # a sentence, half of them and half of it read as noise (as they did before lists of
    # one length were taken out).
    stepped = [key[:40 + 2 * i] for i, key in enumerate(keys(6, 64))]
    assert kind_of(PROSE + "\n\n" + "\n".join(stepped)) == "noise"
    same = [key[:50] for key in keys(6, 64)]
    assert kind_of(PROSE + "\n\n" + "\n".join(same)) is None


def test_strings_one_character_apart_in_length_are_one_list() -> None:
    # Lengths that go up and down by one (numbered items, a trimmed padding) are one list.
    alternating = [key[:50 + i % 2] for i, key in enumerate(keys(6, 64))]
    assert kind_of(PROSE + "\n\n" + "\n".join(alternating)) is None
    # Lengths that fall by two are no list, as those that rise by two.
    falling = [key[:60 - 2 * i] for i, key in enumerate(keys(6, 64))]
    assert kind_of(PROSE + "\n\n" + "\n".join(falling)) == "noise"


def test_a_string_as_long_as_a_window_is_no_item() -> None:
    # A line that can hold a whole window is random characters in one run of text.
    assert kind_of("\n".join(keys(2, 191))) is None
    assert kind_of("\n".join(keys(2, 192))) == "noise"


def test_an_item_holds_at_most_three_spaces() -> None:
    # "1. key" or a key in a few groups is one string; four spaces make a line of text.
    def grouped(key: str, spaces: int) -> str:
        return " ".join([key[:10]] + [key[10 + 5 * j:15 + 5 * j] for j in range(spaces - 1)]
                        + [key[10 + 5 * (spaces - 1):]])

    for spaces, kind in ((3, None), (4, "noise")):
        lines = "\n".join(grouped(key, spaces) for key in keys(6, 64))
        assert kind_of(lines) == kind, spaces
        assert kind_of(PROSE + "\n\n" + lines) == kind, spaces


def test_noise_after_a_list_is_found_where_it_is() -> None:
    # The list is taken out, the noise after it is still noise, and the finding quotes a
    # window of the paragraph that holds the noise, not of the list.
    paragraph = PROSE + noise(240, seed=5) + " " + PROSE
    for before in ("\n".join(keys(6, 64)) + "\n\n", "Keys:\n" + "\n".join(keys(6, 64)) + "\n"):
        found = garble_in_text(before + paragraph, frozenset(), VerdictConfig())
        assert found is not None and found[0] == "noise"
        assert len(found[2]) == 120 and found[2] in paragraph


def test_the_noise_finding_states_each_measure_against_its_threshold() -> None:
    found = garble_in_text(noise(192), frozenset(), VerdictConfig())
    assert found is not None
    assert found[1] == ("192 chars of 6.15 bits per char (threshold 5.8), 99% distinct "
                        "character pairs (threshold 93%), 39% punctuation (threshold 15%)")


def test_the_shuffled_finding_quotes_its_window_of_words() -> None:
    # Solfège syllables in random order: the excerpt is the 32 words of the window (with
    # the space that ends it), not the words after it.
    words = shuffled_words(["do", "re", "mi", "fa", "so", "la", "ti"], 40)
    found = garble_in_text(" ".join(words), frozenset(), VerdictConfig())
    assert found is not None and found[0] == "shuffled_words"
    assert found[2] == " ".join(words[:32]) + " "


SALAD_31 = " ".join(shuffled_words(VOCAB, 31))  # one word short of a window


@pytest.mark.parametrize("ascii_only", [True, False])
def test_letters_a_digit_touches_are_no_word(ascii_only: bool) -> None:
    # 31 shuffled words and a 32nd next to them: salad when it is a word; not when a
    # digit touches it (the letters of an ID, a hash), "0" and "9" as any other digit;
    # "/" and ":" (either side of the digits) are no digits.
    lead = "" if ascii_only else "¶ "  # not ASCII: the words of the scripts path
    for glued in ("alpha", "/alpha", ":alpha"):
        assert kind_of(lead + glued + " " + SALAD_31) == "shuffled_words", glued
        assert kind_of(lead + SALAD_31 + " " + glued[::-1]) == "shuffled_words", glued
    for digit in "09":
        assert kind_of(lead + digit + "alpha " + SALAD_31) is None, digit
        assert kind_of(lead + SALAD_31 + " alpha" + digit) is None, digit
    assert kind_of(lead + "a " + SALAD_31) is None  # one letter is no word
