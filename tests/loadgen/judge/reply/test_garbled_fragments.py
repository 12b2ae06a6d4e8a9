"""The `glued_fragments` and `spaced_letters` detectors of `garbled` at their edges: the
letters a glued run is made of (humps of camelCase, distinct letters, one script), runs
far into a reply and far apart, runs of other scripts than Latin, and spaced letters at
their exact sizes and against the honest texts that space letters out (banners, word
searches, melodies)."""

from __future__ import annotations

import random

from loadgen.judge.reply.garbled import garble_in_text
from loadgen.scenario import VerdictConfig
from tests.loadgen.judge.reply.test_garbled import GLUED, PROSE, glued_around_words


def judge(text: str, **cfg: object) -> tuple[str, str, str] | None:
    return garble_in_text(text, frozenset(), VerdictConfig(**cfg))  # type: ignore[arg-type]


def kind_of(text: str, **cfg: object) -> str | None:
    found = judge(text, **cfg)
    return found[0] if found else None


def three(runs: list[str], between: str = ". ") -> str:
    return between.join(runs)


# ------------------------------------------------------------------ glued_fragments


def test_a_run_with_a_capital_per_16_letters_is_glued_and_more_is_camel_case() -> None:
    # 32 letters with two humps (a glued sentence start, a name) are glued words; with
    # three they read as an identifier.
    two = "theuserWantstheaccountUpgradedto"
    three_humps = "theuserWantstheAccountUpgradedto"
    assert len(two) == len(three_humps) == 32
    assert kind_of(three([two] * 3)) == "glued_fragments"
    assert kind_of(three([three_humps] * 3)) is None


def test_a_run_may_have_its_capital_third() -> None:
    # "toBusiness...": the second letter is lower case, the capital right after it.
    run = "toBusinessplanandthencancelledat"
    assert len(run) == 32
    assert kind_of(three([run, GLUED[:32], GLUED[40:72]])) == "glued_fragments"


def test_glued_words_need_ten_distinct_letters() -> None:
    # "the cat sat on the mat and the hat": ten distinct letters, glued: words. Without
    # "mat", nine: a sequence of few symbols (DNA, a hash) more than words.
    ten = ["thecatsatonthematandthehatsaton", "thematandthecatsatonthehatandthe",
           "catsatonthematandthehatsatonthe"]
    nine = [run.replace("m", "h") for run in ten]
    ten = [run + "c" for run in ten]  # 32 letters each
    nine = [run + "c" for run in nine]
    assert {len(set(run)) for run in ten} == {10} and {len(set(run)) for run in nine} == {9}
    assert kind_of(three(ten)) == "glued_fragments"
    assert kind_of(three(nine)) is None


def test_glued_letters_at_the_very_start_count_against_all_the_letters() -> None:
    # 96 glued letters and 33 ordinary ones from the reply's first character: 74.4%,
    # below the 75% share; 32 ordinary ones: 75%.
    assert kind_of(glued_around_words(32)) == "glued_fragments"
    assert kind_of(glued_around_words(33)) is None


def test_a_reply_glued_whole_is_salad_however_long() -> None:
    text = (GLUED * 4)[:500]
    kind, detail, _ = judge(text)
    assert kind == "glued_fragments"
    assert detail.startswith("500 letters glued in 1 runs of 32+ within 400 chars")


def test_glued_runs_after_a_long_healthy_paragraph_are_found() -> None:
    # An early run on its own, 600 characters of prose, then three runs: the window
    # leaves the early one behind and finds the three.
    text = GLUED[:40] + " " + PROSE * 4 + three([GLUED[:32], GLUED[7:39], GLUED[14:46]])
    kind, detail, _ = judge(text)
    assert kind == "glued_fragments"
    assert detail == ("96 letters glued in 3 runs of 32+ within 400 chars (threshold 96), "
                      "100% of the letters there (threshold 75%)")


def test_two_long_compounds_and_a_short_word_are_not_glued() -> None:
    # German: two compounds of 60 letters side by side, a shorter one (ten distinct
    # letters and more, under 32) after them, and a third long one far later.
    compounds = ("Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz, "
                 "Grundstücksverkehrsgenehmigungszuständigkeitsübertragungsverordnung, "
                 "Bundesverfassungsgericht.")
    assert kind_of(compounds) is None
    later = " Das ist ein Beispiel für lange Wörter im Deutschen und ihre Bedeutung." * 8
    assert kind_of(compounds + later + " Donaudampfschifffahrtsgesellschaftskapitän.") is None


def test_cyrillic_glued_runs_are_salad_from_32_letters() -> None:
    # Runs of one cased script other than Latin, in a reply that starts with a number.
    glued = ("пользовательхочетперевестиаккаунтнабизнестарифапотомотменитьподпискувконце"
             "срокаиполучитьсчет")
    runs32 = [glued[i * 7:i * 7 + 32] for i in range(3)]
    runs31 = [glued[i * 7:i * 7 + 31] for i in range(3)]
    assert kind_of("1. " + three(runs32)) == "glued_fragments"
    assert kind_of("1. " + three(runs31)) is None


def test_a_run_is_of_one_script() -> None:
    # Latin glued to Greek (an explained pair: no switch of scripts) is two runs, each
    # under 32 letters: not three runs of glued words.
    mixed = ["theuserwantstheaccountupgraded" + "τονλογαριασμο",
             "andthencancelledattheendofterm" + "καιμετατοτελος",
             "becausetheyneedaninvoicethenow" + "γιατοτιμολογιο"]
    assert kind_of(three(mixed)) is None
    assert kind_of(three([run[:30] + GLUED[:10] for run in mixed])) == "glued_fragments"


# ------------------------------------------------------------------- spaced_letters


def test_a_reply_of_exactly_24_spaced_letters_is_salad() -> None:
    text = " ".join("theuserwantstheaccountup")
    assert len(text) == 47
    assert kind_of(text) == "spaced_letters"
    kind, detail, excerpt = judge(PROSE + text + " " + PROSE)
    assert (kind, excerpt) == ("spaced_letters", text)
    assert detail == "24 letters in a row one space apart (threshold 24)"


def test_a_banner_spelled_out_word_by_word_is_not_a_chain() -> None:
    # Wider gaps between the words: each word is a chain of its own (a German reply:
    # not ASCII, so no screen stands before the detector).
    banner = "   ".join(" ".join(word) for word in "WELCOME TO THE QUARTERLY REVIEW".split())
    assert kind_of(f"Die Folie zeigt in großen Lettern: {banner}") is None
    assert kind_of(f"Die Folie zeigt in großen Lettern: {banner.replace('   ', ' ')}") \
        == "spaced_letters"


def test_rows_of_a_word_search_are_chains_of_their_own() -> None:
    rng = random.Random(5)
    rows = [" ".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(12))
            for _ in range(6)]
    assert kind_of("Finde die Wörter:\n " + " \n ".join(rows) + " \n") is None
    assert kind_of("Finde die Wörter:\n " + " ".join(rows) + " \n") == "spaced_letters"


def test_spaced_letters_need_eight_distinct() -> None:
    # A melody spelled out (seven note names) is not salad; eight letters are.
    rng = random.Random(1)
    melody = " ".join(rng.choice("CDEFGAB") for _ in range(40))
    assert kind_of(f"Play: {melody}.") is None
    eight = " ".join(rng.choice("abcdefgh") for _ in range(40))
    assert len(set(eight.replace(" ", ""))) == 8
    assert kind_of(f"Play: {eight}.") == "spaced_letters"


def test_a_chain_that_is_no_salad_does_not_end_the_search() -> None:
    alphabet = " ".join("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    spaced = " ".join("theuserwantstheaccountupgraded")
    assert kind_of(f"The alphabet: {alphabet}. Then: {spaced}.") == "spaced_letters"
