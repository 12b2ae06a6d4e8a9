"""The `scripts` detector of `garbled` at its edges: Latin glued to another script inside
words, salad with no Latin or Han at all, the first word of a reply, and the finding a
person reads (how many switches, which scripts, the request's, the excerpt)."""

from __future__ import annotations

from loadgen.judge.reply.garbled import garble_in_text
from loadgen.scenario import VerdictConfig


def judge(text: str, scripts: tuple[str, ...] = ()) -> tuple[str, str, str] | None:
    return garble_in_text(text, frozenset(scripts), VerdictConfig())


def switches_at(offsets: list[int]) -> str:
    """A Cyrillic letter glued to a Han character (one switch, at the Han character) at
    each offset, dots between."""
    text = ""
    for offset in offsets:
        text += "." * (offset - 1 - len(text)) + "а的"
    return text


def test_english_glued_into_russian_words_is_salad() -> None:
    # Sub-words of two languages glued inside words: four switches, then three.
    kind, detail, _ = judge("theния accountовать planские upgradeить.")
    assert kind == "scripts"
    assert ": Cyrillic among Cyrillic, Latin; " in detail  # Latin is seen, and explained
    assert judge("theния accountовать planские.") is None
    # Whole words of each, a space apart, are a Russian reply with English terms.
    assert judge("Мы используем vLLM и KV cache для inference на GPU. " * 4) is None


def test_salad_of_scripts_the_request_never_used_is_found_without_latin_or_han() -> None:
    kind, detail, _ = judge("ан기ан기ан")
    assert kind == "scripts"
    assert detail == ("4 switches between scripts within 120 chars (threshold 4): Cyrillic, "
                      "Hangul among Cyrillic, Hangul; the request's scripts: none beyond Latin")


def test_the_finding_counts_the_switches_of_its_window_only() -> None:
    # Switches at 1, 10, 20 and 30, one at 121 (just past the 120 characters from the
    # first) and one at 200: four in the window.
    kind, detail, excerpt = judge(switches_at([1, 10, 20, 30, 121, 200]))
    assert kind == "scripts"
    assert detail == ("4 switches between scripts within 120 chars (threshold 4): Cyrillic "
                      "among Cyrillic, Han; the request's scripts: none beyond Latin")
    assert excerpt == switches_at([1, 10, 20, 30])  # the letter before the first switch on


def test_the_excerpt_runs_from_the_letter_before_the_first_switch_to_the_last() -> None:
    assert judge("Hello ан的ан的ан, world.")[2] == "н的ан的а"
    assert judge("н的ан的ан")[2] == "н的ан的а"  # the reply's first character


def test_the_scripts_seen_are_those_around_the_first_switch() -> None:
    # The letter before the first switch is the only Cyrillic one, or the only Greek
    # one is just before that (Greek beside Han is a unit, no switch).
    assert judge("ж的ب的ب的")[1].endswith(": Arabic, Cyrillic among Arabic, Cyrillic, Han; "
                                        "the request's scripts: none beyond Latin")
    found = judge("α的ж的ж的ж")
    assert found[1].endswith(": Cyrillic among Cyrillic, Han; the request's scripts: "
                             "none beyond Latin")
    assert found[2] == "的ж的ж的"


def test_the_finding_names_the_requests_own_scripts_beyond_latin_and_han() -> None:
    _, detail, _ = judge("ан기ан기ан", scripts=("Han", "Arabic", "Hebrew"))
    assert detail.endswith(": Cyrillic, Hangul among Cyrillic, Hangul; the request's "
                           "scripts: Arabic, Hebrew")


def test_a_reply_that_starts_with_a_space_has_no_word_before_its_first() -> None:
    # Three switches in a reply that starts with a space: not salad; the first word is
    # compared with nothing, not with the reply's last.
    assert judge(" ан的ан的") is None
    assert judge(" ан的ан的ан")[1].startswith("4 switches")


def test_a_first_word_of_one_letter_counts_before_a_space() -> None:
    # A word at the reply's very first character, then one of another script a space
    # after it: a switch, like any other.
    assert judge("ж 的 ж 的 ж")[0] == "scripts"
    assert judge("ж 的 ж 的") is None
