"""The garbled family's knobs, one group a kind of detector (its `[verdicts]` keys)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from loadgen.judge.reply.family import Knobs, Ordered


class MarkerKnobs(Knobs):
    """`garbled`'s markers and script switches (loadgen.judge.reply.garbled.markers and
    .script_mix): bursts within a window of characters."""

    garbled_marker_burst: int = Field(
        default=4, ge=2, le=10_000,
        description="Markers (special tokens, glued tokenizer markers, U+FFFD, mojibake, "
        "control characters) that make a burst.")
    garbled_marker_window_chars: int = Field(default=160, ge=8, le=1_000_000)
    garbled_script_switches: int = Field(
        default=4, ge=2, le=10_000,
        description="Unexplained switches between scripts that make salad.")
    garbled_script_window_chars: int = Field(default=120, ge=8, le=1_000_000)
    garbled_evidence_span_chars: int = Field(
        default=240, ge=0, le=1_000_000,
        description="Two kinds of half a finding (a detector's rule at half its threshold) "
        "this close together are one finding (loadgen.judge.reply.garbled.evidence); 0 turns "
        "adding evidence off.")


class FragmentKnobs(Knobs):
    """`garbled`'s fragment soup (loadgen.judge.reply.garbled.fragments): words glued together,
    or spelled out one letter a token."""

    garbled_glued_run_letters: int = Field(
        default=32, ge=16, le=100_000,
        description="The shortest run of letters that counts as words glued together.")
    garbled_glued_letters: int = Field(default=96, ge=16, le=1_000_000)
    garbled_glued_share: float = Field(default=0.75, gt=0, le=1)
    garbled_fragment_window_chars: int = Field(default=400, ge=16, le=1_000_000)
    garbled_spaced_letters: int = Field(default=24, ge=8, le=100_000)

    ORDERED: ClassVar[Ordered] = (("garbled_glued_run_letters", "garbled_glued_letters", False),)


class StatisticsKnobs(Knobs):
    """`garbled`'s statistics (loadgen.judge.reply.garbled.statistics): a handful of words
    shuffled, and printable noise."""

    garbled_shuffle_window_words: int = Field(default=32, ge=8, le=100_000)
    garbled_shuffle_min_distinct: int = Field(default=5, ge=2, le=100_000)
    garbled_shuffle_max_distinct: int = Field(default=12, ge=2, le=100_000)
    garbled_shuffle_min_bigram_ratio: float = Field(default=0.85, gt=0, le=2)

    garbled_noise_window_chars: int = Field(default=192, ge=32, le=1_000_000)
    garbled_noise_min_symbol_share: float = Field(default=0.15, ge=0, le=1)
    garbled_noise_min_bits: float = Field(default=5.8, gt=0, le=20)
    garbled_noise_min_distinct_pairs: float = Field(default=0.93, gt=0, le=1)

    ORDERED: ClassVar[Ordered] = (
        ("garbled_shuffle_min_distinct", "garbled_shuffle_max_distinct", False),
        ("garbled_shuffle_max_distinct", "garbled_shuffle_window_words", True),
    )


class WordKnobs(Knobs):
    """`garbled`'s word detectors (loadgen.judge.reply.garbled.words): running text made of no
    language's words, of languages in turn, or without a language's function words."""

    garbled_lexicon_window_words: int = Field(default=20, ge=10, le=100_000)
    garbled_lexicon_unknown_share: float = Field(
        default=0.4, gt=0, le=1,
        description="Share of a window's lower-case words that are no word of the text's "
        "languages (wordfreq) that makes sub-word soup.")
    garbled_alternation_switches: int = Field(
        default=9, ge=2, le=15,
        description="Changes of script between neighbouring common words, within 16 "
        "words, that make words of several languages in turn.")
    garbled_order_window_words: int = Field(default=24, ge=8, le=100_000)
    garbled_order_llr: float = Field(
        default=12.0, gt=0, le=1000,
        description="English running text whose word order speaks this many nats (or "
        "more) against English, over a window, is real words in random order.")
    garbled_function_window_words: int = Field(default=24, ge=8, le=100_000)
    garbled_function_share: float = Field(
        default=0.25, ge=0, le=1,
        description="A window of running text with fewer function words than this share "
        "of what its language's statistics predict is words picked from a vocabulary.")


class GarbledKnobs(MarkerKnobs, FragmentKnobs, StatisticsKnobs, WordKnobs):
    """Every detector's knobs, and the family's switch."""

    garbled: bool = Field(default=True, description="false switches the verdict off.")
