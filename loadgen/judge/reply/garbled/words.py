"""The word detectors of `garbled`: running text that is made of no language's words,
alternates languages word by word, or has none of a language's function words.

They read *running text*: words one space apart (a comma, a full stop or a quote may
stand before the space; a window whose gaps are mostly commas is a list, left out).
Lists, tables, code and markup break it, so their vocabulary is never held to the
grammar of prose. A word is a run of letters that touches no digit, underscore or path
sign; a word with a capital (a name, an acronym, a sentence's first word) is not looked
up, and a single letter is a word only where the language has it as one (a, I; и, в).
What a word is, and which words a language uses most, comes from the language's word
statistics (`judge.text.language`: wordfreq), never from lists kept here.

- unknown_words: in a window of `garbled_lexicon_window_words` (20) words, at least
  `garbled_lexicon_unknown_share` (0.4) of the lower-case words are words of none of the
  text's languages (nor English): sub-word soup ("ing the acc ount ations"). Checked in
  the languages whose word lists are complete enough (wordfreq's 'large' lists); words of
  other languages are not counted either way.
- alternating_scripts: in a window of 16 words, at least `garbled_alternation_switches`
  (9) changes of script between neighbouring common words (each frequent in a language
  of its script, not a name or an acronym): real words of several languages in turn,
  with nothing that holds them together. A Russian sentence that uses English terms
  ("используем KV cache для inference на GPU") changes script three times in eight
  words; words of two languages taken in turn change it at every word or two.
- no_function_words: in a window of `garbled_function_window_words` (24) words of one
  language, at least half of them distinct, fewer function words (the language's 50
  most frequent) than `garbled_function_share` (a quarter) of what the language's own
  statistics predict: real words picked from a vocabulary, with none of the words that
  make them a sentence. A few values repeated (yes no no yes) is an answer, not this.

Every measure is taken once a word and summed over windows with prefix sums, so a reply
costs a pass over its words, whatever the windows.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections.abc import Container, Iterator
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache

import numpy as np
import regex

from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.text import language
from loadgen.judge.text.scripts import (
    SCRIPT_ID,
    SCRIPTS,
    language_script,
    script_of,
    script_table,
)

#: What may stand between two words of running text: a space, a punctuation mark before
#: it (Arabic's comma, semicolon and question mark and Devanagari's danda among them),
#: an opening quote after it (no-break spaces count as spaces); or a zero-width
#: non-joiner or joiner, which Persian writes inside words ("می‌توانید").
_PROSE_GAP = regex.compile(
    r"[,;:.!?)\]»”\"'’\u060c\u061b\u061f\u0964\u0965]{0,2}[ \u00a0\u202f][(\[«“\"'‘]?"
    r"|[\u200c\u200d]")
#: A gap that lists (a comma, a semicolon, a colon): where more than this share of a
#: window's gaps list, the window is a list, not running text.
_LISTING = regex.compile(r"[,;:]")
_LIST_SHARE = 0.25
_MARKS = regex.compile(r"\p{Mn}+")
_CASED = frozenset({"Latin", "Cyrillic", "Greek"})
#: What a word may not touch: it is then part of a name, a path, a number or code.
_NOT_PROSE = frozenset("0123456789_@/\\#$%&=+<>|~^*`{}[]")
_ASCII_LETTERS = re.compile(r"([A-Za-z]+(?:['’][A-Za-z]+)*)")
_LETTERS = regex.compile(r"([\p{L}\p{M}]+(?:['’][\p{L}\p{M}]+)*)")
#: Scripts written without spaces between words: their runs are not words of running text.
_UNSPACED = frozenset({"Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar",
                       "Tibetan"})
_ALTERNATION_WINDOW = 16
_COMMON_ZIPF = 3.0
#: Fewer lower-case words than this in a window: nothing to measure.
_MIN_CHECKED = 10
#: Words picked from a vocabulary are mostly distinct; a few words repeated (yes no no
#: yes, heads tails) is an answer of a few values, or a handful shuffled (`shuffled`).
_MIN_DISTINCT = 0.5
#: Languages whose wordfreq list is complete enough that a word it lacks is no word.
_COMPLETE = frozenset({"ar", "bn", "ca", "cs", "de", "en", "es", "fi", "fr", "he", "it",
                       "mk", "nb", "nl", "pl", "pt", "ru", "sv", "uk"})


@dataclass(frozen=True)
class Words:
    """A text's words, in order, as parallel lists (one entry a word)."""

    keys: list[str]  # case-folded, without marks a dictionary does not spell
    scripts: list[str]
    names: list[bool]  # a capital: a name, an acronym, a sentence's first word
    gaps: list[bool]  # only a prose gap lies between it and the word before
    listed: list[bool]  # that gap lists (a comma, a semicolon, a colon)
    before: list[str]  # the text between it and the token before
    parts: list[str]  # the text split: gap, letters, gap, letters, ..., gap
    index: list[int]  # which run of letters of `parts` each word is

    def __len__(self) -> int:
        return len(self.keys)

    @cached_property
    def _edges(self) -> list[int]:
        return [0, *itertools.accumulate(len(p) for p in self.parts)]

    @cached_property
    def starts(self) -> list[int]:
        """Where each word starts in the text."""
        edges = self._edges
        return [edges[2 * i + 1] for i in self.index]

    @cached_property
    def ends(self) -> list[int]:
        edges = self._edges
        return [edges[2 * i + 2] for i in self.index]

    @cached_property
    def single_script(self) -> bool:
        return len(set(self.scripts)) <= 1

    @cached_property
    def listed_sums(self) -> np.ndarray:
        """Prefix sums of `listed`: the listing gaps of any stretch in one subtraction."""
        return _sums(self.listed)


@cache
def _languages_of_script() -> dict[str, tuple[str, ...]]:
    """Script -> the wordfreq languages written in it, from the Unicode CLDR's likely
    script of each language (`langcodes`, which wordfreq itself uses): derived, not
    listed, and without loading any word list."""
    import langcodes

    table = script_table()
    sample = {name: chr(int(np.flatnonzero(table == SCRIPT_ID[name])[0]))
              for name in SCRIPTS if name != "Other" and (table == SCRIPT_ID[name]).any()}
    out: dict[str, list[str]] = {}
    for lang in sorted(language.import_wordfreq().available_languages()):
        if lang in ("ja", "zh", "ko"):
            continue  # their lists need a segmenter; their words are not spaced anyway
        code = langcodes.Language.get(lang).maximize().script
        for name, char in sample.items():
            if code and regex.match(rf"\p{{Script={code}}}", char):
                out.setdefault(name, []).append(lang)
                break
    return {script: tuple(langs) for script, langs in out.items()}


@lru_cache(maxsize=1 << 16)
def _key(raw: str, script: str) -> str:
    """A word as the word lists spell it: case-folded (wordfreq folds case, final sigma
    and eszett so), composed; in the cased alphabets, without the marks that stay apart
    once composed (stress marks: молоко́), which dictionaries do not spell."""
    if raw.isascii():
        return raw.lower()
    folded = unicodedata.normalize("NFC", raw.casefold())
    if script not in _CASED:
        return folded
    return _MARKS.sub("", folded)


#: How many texts' words are kept: a reply's content is read by `garbled`, then by
#: `wrong_language` and `unfinished` (reply_language), one text after the other...
_WORDS_KEPT = 4
#: ...where it is this short at most (a long text's words take memory; their reading
#: costs little next to the rest of its judging).
_WORDS_KEPT_CHARS = 8192


def words(text: str) -> Words:
    """The words of a text, in order: runs of letters that touch no digit, underscore or
    path sign (then they are part of a name, a path, a number or code) and no dot before a
    letter (a domain). A single letter is a word only where the language has it as one
    (a, I; и, в; à): the detectors ask the language's function words.

    Kept for the last few short texts: several rules read the same reply's words, and
    none changes them (the lists are read only), so the reading is done once."""
    if len(text) > _WORDS_KEPT_CHARS:
        return _read_words(text)
    return _kept_words(text)


@lru_cache(maxsize=_WORDS_KEPT)
def _kept_words(text: str) -> Words:
    return _read_words(text)


def _read_words(text: str) -> Words:
    ascii_text = text.isascii()
    parts = (_ASCII_LETTERS if ascii_text else _LETTERS).split(text)
    gaps_around = parts[0::2]  # before the first letters, between, after the last
    not_prose = _NOT_PROSE
    count = len(parts) // 2
    index = [i for i in range(count)
             if gaps_around[i][-1:] not in not_prose and gaps_around[i + 1][:1] not in not_prose
             and (gaps_around[i + 1] != "." or i + 1 == count)]
    raws = [parts[2 * i + 1] for i in index]
    if ascii_text:
        scripts = ["Latin"] * len(raws)
        keys = [raw.lower() for raw in raws]
    else:
        scripts = [script_of(raw) for raw in raws]
        keys = [_key(raw, script) for raw, script in zip(raws, scripts, strict=True)]
    before = [gaps_around[i] for i in index]
    prose = _PROSE_GAP.fullmatch
    # A prose gap, and the word before it is the letters right before (none left out).
    gaps = [k > 0 and index[k - 1] == i - 1 and (g == " " or prose(g) is not None)
            for k, (i, g) in enumerate(zip(index, before, strict=True))]
    listing = _LISTING.search
    listed = [gap and g != " " and listing(g) is not None
              for gap, g in zip(gaps, before, strict=True)]
    names = [raw != key and not raw.islower() for raw, key in zip(raws, keys, strict=True)]
    return Words(keys, scripts, names, gaps, listed, before, parts, index)


def runs(found: Words, least: int) -> Iterator[tuple[int, int]]:
    """(first, last + 1) of each stretch of running text of `least` words or more: words
    one prose gap apart, none of a script written without spaces."""
    if len(found) < least:
        return
    breaks = ~np.asarray(found.gaps, dtype=bool)
    unspaced = None
    if not found.single_script or (found.scripts and found.scripts[0] in _UNSPACED):
        unspaced = np.array([s in _UNSPACED for s in found.scripts], dtype=bool)
        breaks |= unspaced
        breaks[1:] |= unspaced[:-1]  # the word after one starts a run too
    starts = [*np.flatnonzero(breaks).tolist(), len(found)]
    for first, last in itertools.pairwise(starts):
        if unspaced is not None and unspaced[first]:
            continue
        if last - first >= least:
            yield first, last


def windows(found: Words, first: int, last: int, size: int) -> Iterator[tuple[int, int]]:
    """Windows (lo, hi) of `size` words a quarter apart over a run, the last flush with
    its end; a window whose gaps are mostly commas is a list and is left out."""
    if last - first <= size:
        starts = [first]
    else:
        starts = list(range(first, last - size + 1, max(1, size // 4)))
        if starts[-1] != last - size:
            starts.append(last - size)
    listed = found.listed_sums
    for lo in starts:
        hi = min(last, lo + size)
        if listed[hi] - listed[lo + 1] <= _LIST_SHARE * (hi - lo - 1):
            yield lo, hi


@lru_cache(maxsize=1024)
def candidates(script: str, text_languages: tuple[str, ...]) -> tuple[str, ...]:
    """The languages a word of `script` may be a word of: the text's own where they use
    that script (English too, with Latin), else every language written in it (English
    alone for Latin, which two dozen write)."""
    of_script = _languages_of_script().get(script, ())
    own = tuple(lang for lang in text_languages if lang in of_script)
    if script == "Latin":  # English terms are everywhere; Latin is written in 27 more
        return tuple(dict.fromkeys((*own, "en")))
    return own or of_script


def _sums(flags: list[bool] | np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(np.asarray(flags, dtype=np.int64))))


class _AnyOf:
    """The words of any of several languages (a lookup in each list in turn)."""

    __slots__ = ("_lists",)

    def __init__(self, lists: list[Container[str]]) -> None:
        self._lists = lists

    def __contains__(self, word: object) -> bool:
        return any(word in words for words in self._lists)


@lru_cache(maxsize=64)
def _known_in_any(langs: tuple[str, ...]) -> Container[str]:
    """The words of any of the languages."""
    if len(langs) == 1:
        return language.known_words(langs[0])
    return _AnyOf([language.known_words(lang) for lang in langs])


def distinct_enough(found: Words, lo: int, hi: int) -> bool:
    """At least half the window's words distinct: words picked from a vocabulary, not a
    few values repeated (an answer) or a handful shuffled (`shuffled`'s)."""
    return len(set(found.keys[lo:hi])) >= _MIN_DISTINCT * (hi - lo)


def _of_script(found: Words, script: str) -> np.ndarray:
    """Which words are of `script`."""
    if found.single_script:
        return np.full(len(found), found.scripts[0] == script if found.scripts else False)
    return np.array([s == script for s in found.scripts], dtype=bool)


def unknown_words(text: str, found: Words, text_languages: tuple[str, ...],
                  cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    size = cfg.garbled_lexicon_window_words
    share = cfg.garbled_lexicon_unknown_share
    need = math.ceil(share * _MIN_CHECKED)  # unknown words a window needs at the least
    checked = np.zeros(len(found), dtype=bool)
    unknown = np.zeros(len(found), dtype=bool)
    for script in set(found.scripts):
        langs = candidates(script, text_languages)
        if not langs or not _COMPLETE.issuperset(langs):
            continue
        known = _known_in_any(langs)
        short = frozenset().union(*(language.function_words(lang) for lang in langs))
        keys, names = found.keys, found.names
        mine = _of_script(found, script) & np.array(
            [not n and (len(k) > 1 or k in short) for k, n in zip(keys, names, strict=True)],
            dtype=bool)
        missing = np.array([k not in known for k in keys], dtype=bool)
        checked |= mine
        unknown |= mine & missing
    if int(unknown.sum()) < need:
        return None
    c, u = _sums(checked), _sums(unknown)
    for first, last in runs(found, _MIN_CHECKED + 2):
        for lo, hi in windows(found, first, last, size):
            n = int(c[hi] - c[lo])
            k = int(u[hi] - u[lo])
            if n >= _MIN_CHECKED and k >= share * n:
                missed = [found.keys[i] for i in range(lo, hi) if unknown[i]]
                return (f"{k} of {n} words in a row are no language's words "
                        f"(threshold {share:.0%}): {', '.join(missed[:6])}",
                        found.starts[lo], found.ends[hi - 1])
    return None


def _common(found: Words, i: int, text_languages: tuple[str, ...]) -> bool:
    return not found.names[i] and any(
        language.zipf(found.keys[i], lang) >= _COMMON_ZIPF
        for lang in candidates(found.scripts[i], text_languages))


def alternating_scripts(text: str, found: Words, text_languages: tuple[str, ...],
                        cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    need = cfg.garbled_alternation_switches
    if len(set(found.scripts)) < 2:
        return None
    # A change of script between neighbouring words a prose gap apart, both common words.
    switch = [found.gaps[i] and found.scripts[i] != found.scripts[i - 1]
              and _common(found, i, text_languages) and _common(found, i - 1, text_languages)
              for i in range(1, len(found))]
    sums = _sums(switch)
    size = _ALTERNATION_WINDOW - 1
    for start in range(0, max(1, len(switch) - size + 1)):
        count = int(sums[min(len(switch), start + size)] - sums[start])
        if count >= need:
            last = min(len(found) - 1, start + size)
            scripts = sorted(set(found.scripts[start:last + 1]))
            return (f"{count} changes of script between neighbouring words within "
                    f"{last - start + 1} words (threshold {need}): {', '.join(scripts)}",
                    found.starts[start], found.ends[last])
    return None


def affixing(lang: str) -> bool:
    """A language with word statistics whose function words are mostly affixes."""
    return language.has_lexicon(lang) and not _has_function_words(lang)


@cache
def _has_function_words(lang: str) -> bool:
    """The language writes its function words as words of their own (wordfreq says a
    quarter of running text or more is its 50 most frequent words; Arabic, Hebrew and
    Turkish write most of theirs as affixes, below that)."""
    try:
        return language.expected_function_share(lang) >= 0.25
    except (LookupError, ImportError):
        return False


def no_function_words(text: str, found: Words, text_languages: tuple[str, ...],
                      cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    size = cfg.garbled_function_window_words
    if len(found) < size:
        return None
    counted = np.zeros(len(found), dtype=bool)
    function = np.zeros(len(found), dtype=bool)
    expected = np.zeros(len(found))
    for script in set(found.scripts):
        # The word's own language (the text's, where it writes in this script): its
        # statistics say how many function words to expect.
        langs = candidates(script, text_languages)[:1]
        if not langs or not _has_function_words(langs[0]):
            continue
        # A function word of any language the text or its request writes in this script
        # counts (Spanglish: "the" and "la"); the text's own language sets the share.
        own = frozenset().union(*(language.function_words(lang) for lang in
                                  dict.fromkeys((*langs, *text_languages))
                                  if lang == langs[0] or language_script(lang) == script))
        is_function = np.array([k in own for k in found.keys], dtype=bool)
        mine = _of_script(found, script) & (is_function | np.array(
            [len(k) > 1 for k in found.keys], dtype=bool))
        counted |= mine
        function |= mine & is_function
        expected[mine] = language.expected_function_share(langs[0])
    c, f = _sums(counted), _sums(function)
    e = np.concatenate(([0.0], np.cumsum(expected)))
    # A screen: over every `size` words in a row (running text or not), the fewest
    # function words against the most any window could be allowed.
    tops = float(cfg.garbled_function_share * expected.max() * size) if expected.any() else 0
    if (f[size:] - f[:-size]).min() >= tops:
        return None
    for first, last in runs(found, size):
        for lo, hi in windows(found, first, last, size):
            n = int(c[hi] - c[lo])
            if n < size * 3 // 4:
                continue
            predicted = float(e[hi] - e[lo]) / n
            k = int(f[hi] - f[lo])
            if k < cfg.garbled_function_share * predicted * n and distinct_enough(found, lo, hi):
                return (f"{k} function words in {n} words of running text, where the "
                        f"language's statistics predict {predicted:.0%} (threshold: "
                        f"{cfg.garbled_function_share:.0%} of that)",
                        found.starts[lo], found.ends[hi - 1])
    return None
