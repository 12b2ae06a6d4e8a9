"""The `noise` and `shuffled_words` detectors at their exact edges: each measure at its
threshold (the `[verdicts]` keys make the edges reachable), the screens a window must
pass first, where the windows lie, and what counts as running text."""

from __future__ import annotations

import itertools
import random
import string
from typing import Any

import numpy as np

from loadgen.judge.reply.garbled import garble_in_text
from loadgen.scenario import VerdictConfig
from tests.loadgen.judge.reply.test_garbled import PROSE, VOCAB, noise, shuffled_words


def found(text: str, **keys: Any) -> tuple[str, str, str] | None:
    return garble_in_text(text, frozenset(), VerdictConfig(**keys))


def kind_of(text: str, **keys: Any) -> str | None:
    hit = found(text, **keys)
    return hit[0] if hit else None


def char_class(c: str) -> int:
    """The noise rule's classes: space, lower, upper, digit, ASCII punctuation."""
    return next(i for i, test in enumerate((str.isspace, str.islower, str.isupper,
                                            str.isdigit, lambda _: True)) if test(c))


# 64 characters, each 3 times in a window of 192: exactly 6 bits per character, half of
# them punctuation.
ALPHABET = string.punctuation + string.ascii_lowercase + "012345"


def switching(switches: int, seed: int = 0) -> str:
    """192 characters of ALPHABET, each three times, in an order that changes class
    exactly `switches` times between neighbours."""
    rng = random.Random(seed)
    chars = list(ALPHABET * 3)
    while True:
        rng.shuffle(chars)
        window = "".join(chars)
        if sum(char_class(a) != char_class(b)
               for a, b in itertools.pairwise(window)) == switches:
            return window


NOISY = switching(96)
PAIRS = len(set(itertools.pairwise(NOISY)))  # of 191


def test_noise_changes_class_at_least_every_other_character() -> None:
    # 96 changes of class in 191 neighbours is random enough; 95 is not (code, words).
    assert kind_of(NOISY) == "noise"
    assert kind_of(switching(95)) is None


def test_each_noise_measure_holds_at_its_exact_threshold() -> None:
    hit = found(NOISY)
    assert hit is not None and hit[1].startswith("192 chars of 6.00 bits per char")
    assert kind_of(NOISY, garbled_noise_min_bits=6.0) == "noise"
    assert kind_of(NOISY, garbled_noise_min_bits=6.0 + 1e-9) is None
    assert kind_of(NOISY, garbled_noise_min_distinct_pairs=PAIRS / 191) == "noise"
    # The share is of the window's 191 pairs: half a pair more is too many.
    assert kind_of(NOISY, garbled_noise_min_distinct_pairs=(PAIRS + 0.5) / 191) is None
    assert kind_of(NOISY, garbled_noise_min_symbol_share=0.5) == "noise"
    assert kind_of(NOISY, garbled_noise_min_symbol_share=0.5 + 1 / 384) is None


FOREIGN = "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔ"  # Latin letters outside ASCII


def test_noise_is_ascii_with_at_most_a_tenth_other_characters() -> None:
    # A window of 200: 20 characters outside ASCII are a tenth, 21 too many.
    def mixed(foreign: int) -> str:
        ascii_part = iter(noise(200 - foreign, seed=2))
        return "".join(FOREIGN[i // 9] if i % 9 == 4 and i // 9 < foreign else next(ascii_part)
                       for i in range(200))

    assert kind_of(mixed(20), garbled_noise_window_chars=200) == "noise"
    assert kind_of(mixed(21), garbled_noise_window_chars=200) is None


def test_noise_after_a_sentence_in_another_script_is_noise() -> None:
    # The characters outside ASCII are counted per window, not from the text's start.
    text = "这是服务器返回的一段说明文字，后面是它生成的内容。" * 2 + "\n" + noise(240)
    assert kind_of(text) == "noise"


def test_a_row_of_punctuation_does_not_make_base64_noise() -> None:
    # The share of punctuation is each window's own: a ruler line elsewhere in the text
    # does not let a run of letters and digits (base64, few symbols) through.
    rng = random.Random(4)
    b64 = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(480))
    text = "-" * 80 + "\n" + b64
    assert kind_of(text, garbled_noise_min_bits=5.0) is None
    assert kind_of(text, garbled_noise_min_bits=5.0, garbled_noise_min_symbol_share=0) == "noise"


def start_of(text: str, **keys: Any) -> int:
    hit = found(text, **keys)
    assert hit is not None
    return text.index(hit[2])


def test_noise_windows_lie_a_quarter_window_apart() -> None:
    # The finding quotes its window, which starts on a multiple of 48 characters.
    text = PROSE + noise(240, seed=1) + " " + PROSE
    assert start_of(text) % 48 == 0
    assert start_of(text, garbled_noise_window_chars=160) % 40 == 0


def test_noise_at_the_very_end_of_a_text_is_found() -> None:
    # The last window lies flush with the end, wherever the quarter steps stop: with
    # punctuation asked of exactly half the window, only the window of NOISY holds it.
    for words in range(20, 29):
        text = "word " * words + NOISY
        assert start_of(text, garbled_noise_min_symbol_share=0.5) == len(text) - 192, words


def test_shuffled_words_at_the_very_end_of_a_text_are_found() -> None:
    # 8 distinct words first (too many with the salad's 8 for any window but the last),
    # then 35 words of salad: the last window of 32, flush with the end, holds only salad.
    text = "Alpha bravo charlie delta echo foxtrot golf hotel, then: " + \
        " ".join(shuffled_words(VOCAB, 35, seed=3))
    assert kind_of(text) == "shuffled_words"


def spaced(words: list[str], one_space: int) -> str:
    """The words one space apart but for gaps of three spaces (columns, not running text)
    in the middle: `one_space` of the gaps are one space, the first and the last too."""
    gaps = len(words) - 1
    wide = range((gaps - (gaps - one_space)) // 2, (gaps + (gaps - one_space)) // 2)
    assert len(wide) == gaps - one_space
    return "".join(w + ("   " if i in wide else " ") for i, w in enumerate(words)).rstrip()


def test_running_text_is_four_in_five_words_a_space_apart() -> None:
    # A window of 32 words: the 31 after the first, 25 of them one space after the word
    # before, are running text (80%); 24 are not.
    words = shuffled_words(VOCAB, 32)
    assert kind_of(spaced(words, 25)) == "shuffled_words"
    assert kind_of(spaced(words, 24)) is None
    # 26 words: 20 of 25 is 80% exactly.
    words = shuffled_words(VOCAB, 26, seed=1)
    assert kind_of(spaced(words, 20), garbled_shuffle_window_words=26) == "shuffled_words"
    assert kind_of(spaced(words, 19), garbled_shuffle_window_words=26) is None


def test_the_first_word_of_a_window_need_not_follow_a_space() -> None:
    # 8 words of a header, then a window of 32 words, the first of them one space after
    # the header: only the 31 after it count.
    header = "Alpha bravo charlie delta echo foxtrot golf hotel "
    words = shuffled_words(VOCAB, 32, seed=2)
    assert kind_of(header + spaced(words, 25)) == "shuffled_words"
    assert kind_of(header + spaced(words, 24)) is None


def test_a_csv_row_after_a_sentence_is_no_salad() -> None:
    # The words a sentence joins before a window count for none of the windows after it.
    assert kind_of(PROSE * 3 + ", ".join(shuffled_words(VOCAB, 40))) is None


def test_words_a_space_and_a_dash_apart_are_no_running_text() -> None:
    # Flags, an inline list: two characters between words are running text only when
    # both are spaces, wherever the first gap of the text is two spaces.
    words = shuffled_words(VOCAB, 40)
    assert kind_of("Options  " + " -".join(words)) is None
    assert kind_of("Options  " + "  ".join(words)) == "shuffled_words"


def test_the_bigram_ratio_holds_at_its_exact_threshold() -> None:
    # The rule's own arithmetic, in the same float operations.
    words = shuffled_words(VOCAB, 32)
    distinct = np.array([len(set(words))])
    cells = distinct.astype(np.float64) ** 2
    expected = cells * -np.expm1(-31 / cells)
    ratio = float((len(set(itertools.pairwise(words))) / expected)[0])
    text = " ".join(words)
    assert kind_of(text, garbled_shuffle_min_bigram_ratio=ratio) == "shuffled_words"
    assert kind_of(text, garbled_shuffle_min_bigram_ratio=ratio + 1e-9) is None


def strings(lengths: list[int], seed: int = 3) -> list[str]:
    """Random strings of letters, digits and punctuation (generated keys), one a length."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + string.punctuation
    return ["".join(rng.choices(alphabet, k=n)) for n in lengths]


def with_spaces(line: str, spaces: int) -> str:
    step = len(line) // (spaces + 1)
    return " ".join(line[i * step:(i + 1) * step] for i in range(spaces)) + " " + \
        line[spaces * step:]


def test_a_list_is_three_quarters_strings_of_the_lines_its_window_touches() -> None:
    # A line of text (four spaces) of 48 characters and three strings of lengths that
    # differ (no list of one length): 144 of 192 characters are strings, 75%: a list.
    # One character fewer in the last string and it is not.
    text_line = with_spaces(strings([44], seed=7)[0], 4)
    assert len(text_line) == 48
    listed = "\n".join([text_line, *strings([40, 48, 56])])
    assert kind_of(listed) is None
    assert kind_of("\n".join([text_line, *strings([40, 48, 55])])) == "noise"


def test_one_string_and_blank_lines_are_no_list() -> None:
    line = strings([150])[0]
    text_line = with_spaces(strings([38], seed=7)[0], 4)
    assert kind_of(line + "\n\n" + text_line) == "noise"
    assert kind_of(line + "\n" + strings([40], seed=7)[0]) is None  # two strings


def test_a_list_of_strings_of_any_lengths_is_a_list_whatever_lies_beyond_it() -> None:
    # Strings of lengths that vary (no list of one length), with long paragraphs before
    # and after, kept apart by plain short items: the windows on the strings touch only
    # items; the paragraphs, lines away, count for nothing.
    paragraph = (PROSE * 4).strip()
    plain = "\n".join(["ok"] * 100)
    ragged = "\n".join(strings([40, 50, 60, 45, 55, 65]))
    text = "\n".join(["Keys", paragraph, plain, ragged, plain, paragraph, "end"])
    assert kind_of(text) is None
    assert kind_of("\n".join(["Keys", paragraph, ragged, paragraph, "end"])) == "noise"


def test_a_list_is_taken_out_to_the_character() -> None:
    # Two strings, then noise right after them: what is left once the list is out starts
    # with the newline after its last string, and the finding quotes from there on, the
    # window's length of it.
    for size, item, length, keys in ((192, 150, 200, {}),
                                     (40, 30, 60, {"garbled_noise_min_bits": 4.0})):
        listed = "\n".join(strings([item, item]))
        tail = noise(length, seed=6)
        hit = found(listed + "\n" + tail, garbled_noise_window_chars=size, **keys)
        assert hit is not None and hit[0] == "noise"
        assert hit[2] == ("\n" + tail)[:min(size, 120)], size


def test_keys_of_one_length_then_codes_of_others_are_lists() -> None:
    # A sentence, keys of one length, then codes of lengths that vary: once the keys are
    # out, the codes next to the sentence are still three quarters of their windows.
    sentence = "Here are the six API keys and then the three recovery codes, one a line:"
    text = "\n".join([sentence, *strings([64] * 6), *strings([100, 150, 120], seed=8)])
    assert kind_of(text) is None
