"""`garbled`: text that is not language (token salad), with a clean finish.

A decode row that reads another request's KV (C128A and its relatives) answers in
sub-word soup of the whole vocabulary, bursts of `<｜begin▁of▁sentence｜>`, or noise, and
still finishes with `stop` or a well-formed tool call. The rule judges the reasoning, the
content and every string value of every tool call's arguments (walked recursively; raw
arguments that do not parse are judged as they are), each over windows, so a short
salad burst in the middle of a healthy reply is caught. Each detector flags only strong
evidence; its thresholds are `[verdicts]` keys (`garbled_*`, docs/scenario-keys.md):

- markers: special tokens (`<｜…｜>`, `<|…|>`), tokenizer markers glued after a letter
  (SentencePiece `▁`, byte-level BPE `Ġ`/`Ċ`) or in a row, byte pieces (`<0x0A>`), U+FFFD
  replacement characters, UTF-8 read as Latin-1 (`Ã©`) and stray control characters
  (not ANSI colours): at least `garbled_marker_burst` (4) within
  `garbled_marker_window_chars` (160), one of them repeated. A single special token
  named in prose, or a chat template spelled out once, is `token_leak`'s business.
- scripts: letters of two scripts that meet inside a word (no separator), or two
  non-Latin scripts separated only by spaces, where the pair is not explained: Latin and
  Han always are (DeepSeek answers in both), so are the request's own scripts
  (`params["scripts"]`), Han with kana or Hangul (Japanese, Korean), Latin with kana,
  Hangul or Greek (terms and units), Latin with the scripts written without spaces
  (Thai, Lao, Khmer, Myanmar, Tibetan). `garbled_script_switches` (4) such switches
  within `garbled_script_window_chars` (120). Whole words of many scripts with
  punctuation or Latin between them ("hello" in ten languages) are not switches, nor is
  a Russian reply's English terms set off by spaces.
- glued_fragments: runs of at least `garbled_glued_run_letters` (32) letters of one
  cased script (Latin, Cyrillic, Greek), lower case after the first but for a capital
  per 16 letters (camelCase has one every word), drawn from at least 10 letters (a DNA
  string or a hex hash is not words): at least 3 such runs (one of 96 letters counts
  three) and `garbled_glued_letters` (96) letters within `garbled_fragment_window_chars`
  (400), at least `garbled_glued_share` (0.75) of the window's letters. Words a
  detokeniser glued together without their spaces; a long compound named in a sentence,
  or two side by side, is not.
- spaced_letters: a chain of one-character tokens one space apart ("T h e _ u s e r")
  holding at least `garbled_spaced_letters` (24) letters, at least 8 distinct, not an
  alphabet in order (a word-search row, a spelled word or bits are shorter or fewer).
- shuffled_words: a window of `garbled_shuffle_window_words` (32) words of running text
  (80% of them follow the one before with only spaces between: not a table's cells or a
  list's items; a word is two letters or more, or one CJK character, and no digit
  touches it) with `garbled_shuffle_min_distinct` (5) to `garbled_shuffle_max_distinct`
  (12) distinct words whose distinct pairs reach `garbled_shuffle_min_bigram_ratio`
  (0.85) of what a random order of them gives: a handful of words shuffled. A template
  or a loop repeats its pairs and stays far below.
- noise: a window of `garbled_noise_window_chars` (192) characters, at most 10% outside
  ASCII, with at least `garbled_noise_min_symbol_share` (0.15) ASCII punctuation, a
  character entropy of at least `garbled_noise_min_bits` (5.8) bits and at least
  `garbled_noise_min_distinct_pairs` (0.93) of its character pairs distinct: random
  printable characters. Base64 (few symbols), hex hashes and UUIDs (4 bits), code,
  regexes and minified JSON (their pairs repeat) stay below; random strings one to a line
  (generated passwords, keys) are a list, a format, beside a sentence too: runs of lines
  of one length (give or take a character) are taken out before the rest is judged.

What the defaults catch at the least: 4 markers in 160 characters (four BOS tokens in a
row); 4 switches in 120 characters (about 40 tokens of multilingual soup, a third of
them neither Latin nor Han); three runs of 32 glued letters (or one of 96); 24 spaced
letters; 32 words of a handful shuffled; 192 characters of printable noise (240 among
other text: windows lie a quarter apart). Not caught: soup of one script whose pieces
keep ordinary spaces ("ing the acc ount ations"), which only a lexicon would tell from a
language we do not know; noise laid out one string of one length a line (it reads as
generated keys); a random sequence of a
handful of words that is honest (the digits of pi spelled out) is caught, wrongly; and
garbage too short to be any of the above (a tool argument of a dozen characters).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import orjson

from loadgen import fields
from loadgen.judge.reply.family import Family, Finding, Found
from loadgen.judge.reply.garbled.english_screen import could_fire
from loadgen.judge.reply.garbled.evidence import adds_up
from loadgen.judge.reply.garbled.fragments import ASCII_LETTER, CASED, glued, runs, spaced_letters
from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.garbled.markers import _may_have_markers, markers
from loadgen.judge.reply.garbled.script_mix import may_switch, script_switches
from loadgen.judge.reply.garbled.statistics import may_be_shuffled, noise, shuffled
from loadgen.judge.reply.garbled.word_order import word_order
from loadgen.judge.reply.garbled.words import (
    alternating_scripts,
    no_function_words,
    unknown_words,
    words,
)
from loadgen.judge.text.language import has_lexicon, language_of
from loadgen.judge.text.scripts import INHERITED, code_points, language_scripts, scripts_of
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict

EXCERPT_CHARS = 120


class GarbleFinding(Finding):
    """Where salad was found and what was measured."""

    field: str = ""  # "reasoning", "content", or "call 0 change_plan.reason"
    kind: str = ""  # the detector: markers, scripts, glued_fragments, spaced_letters, ...
    detail: str = ""  # what it measured against its threshold
    excerpt: str = ""  # the offending window, at most EXCERPT_CHARS characters

#: Fewer words than this: too short for the word detectors' windows.
_MIN_WORDS = 12


def _shortest_ascii(cfg: GarbledKnobs) -> int:
    """The shortest ASCII text any detector but the markers' can fire on under these
    keys (32 with the defaults): a chain of spaced letters (2 x letters - 1), a run of
    glued letters, a window of words of two letters one space apart, a noise window."""
    return min(2 * cfg.garbled_spaced_letters - 1, cfg.garbled_glued_run_letters,
               3 * cfg.garbled_shuffle_window_words - 1, cfg.garbled_noise_window_chars)


# What an ASCII text must contain before each detector can fire (screens of a few C-speed
# passes, each a necessary condition of its detector, so they never hide a finding): a
# marker's first characters (control bytes, `<|`, `<0x`); a run of letters long enough to
# be glued words; a chain of one-character tokens one space apart; punctuation enough,
# close enough together, for one noise window.
_ASCII_CONTROL = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])
_ASCII_PUNCTUATION = bytes([*range(33, 48), *range(58, 65), *range(91, 97), *range(123, 127)])
# Every solid character as "x", a space as itself, other white space as "w": a chain of
# one-character tokens one space apart reads "x x x ...".
_AS_CHAIN = bytes(0x20 if b == 0x20 else 0x77 if b in b"\t\n\x0b\x0c\r" else 0x78
                  for b in range(256))
# Every ASCII letter as "a", anything else as a space: a run of n letters reads "a" * n.
_AS_LETTER = bytes(0x61 if (0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A) else 0x20
                   for b in range(256))
_AS_PUNCTUATION = bytes(1 if b in _ASCII_PUNCTUATION else 0 for b in range(256))
_NOISE_BLOCK = 64  # a noise window lies within this many consecutive blocks, plus one


def _count(raw: bytes, which: bytes) -> int:
    return len(raw) - len(raw.translate(None, which))


def _may_chain(raw: bytes, letters: int) -> bool:
    """A chain of `letters` one-character tokens one space apart could be in the text."""
    return b" ".join([b"x"] * letters) in raw.translate(_AS_CHAIN)


def _may_be_noise(raw: bytes, cfg: GarbledKnobs) -> bool:
    """Some window of the noise rule could hold its share of punctuation: the blocks that
    cover any window hold at least as much."""
    size, block = cfg.garbled_noise_window_chars, _NOISE_BLOCK
    need = cfg.garbled_noise_min_symbol_share * size
    if len(raw) < size or _count(raw, _ASCII_PUNCTUATION) < need:
        return False
    marks = np.frombuffer(raw.translate(_AS_PUNCTUATION), dtype=np.uint8)
    per_block = np.add.reduceat(marks, np.arange(0, len(marks), block), dtype=np.int64)
    span = -(-size // block) + 1  # blocks a window of `size` may touch
    sums = np.convolve(per_block, np.ones(span, dtype=np.int64), mode="valid") \
        if len(per_block) >= span else per_block.sum(keepdims=True)
    return bool(sums.max() >= need)


def _has_run(letters: bytes, length: int) -> bool:
    """A run of at least `length` ASCII letters (at least one letter) in the text whose
    letters `_AS_LETTER` made "a": one substring search at C speed."""
    return b"a" * max(1, length) in letters


def _letter_runs(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(which characters are letters, starts, ends of the runs of letters) of ASCII text."""
    cased = ASCII_LETTER[points]
    edges = np.flatnonzero(np.diff(np.concatenate(([False], cased, [False])).view(np.int8)))
    return cased, edges[0::2], edges[1::2]


def _ascii_garble(text: str, cfg: GarbledKnobs, languages: tuple[str, ...] = ()
                  ) -> tuple[str, str, str] | None:
    """The detectors an ASCII text can trip, each only past its screen: one script, so
    no script switches; its letters are the cased ones. The runs of letters, as numpy
    arrays, are worked out only for a detector that gets past its screen (a short
    healthy reply needs none of them)."""
    raw = text.encode("ascii")
    points = np.frombuffer(raw, dtype=np.uint8)
    marked = "<|" in text or "<0x" in text or _count(raw, _ASCII_CONTROL) > 0
    if marked:
        found = markers(text, points, cfg)
        if found:
            return _report("markers", text, found)
    if len(text) < _shortest_ascii(cfg):
        return None  # too short for any other detector's window
    letters = raw.translate(_AS_LETTER)
    letter_runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    if _has_run(letters, cfg.garbled_glued_run_letters):
        letter_runs = _letter_runs(points)
        found = glued(text, *letter_runs, cfg)
        if found:
            return _report("glued_fragments", text, found)
    if _may_chain(raw, cfg.garbled_spaced_letters):
        found = spaced_letters(text, points, cfg)
        if found:
            return _report("spaced_letters", text, found)
    if _may_be_noise(raw, cfg):
        found = noise(text, points, cfg)
        if found:
            return _report("noise", text, found)
    if may_be_shuffled(text, cfg):
        letter_runs = letter_runs or _letter_runs(points)
        found = shuffled(points, None, letter_runs[1:], cfg)
        if found:
            return _report("shuffled_words", text, found)
    # Two kinds of half a finding (ASCII has one script, so markers, spaced letters and
    # glued runs): each screened first, the rule run only where two may be there.
    maybe = marked + _may_chain(raw, cfg.garbled_spaced_letters // 2) + _has_run(letters, 16)
    if maybe >= 2 and cfg.garbled_evidence_span_chars:
        cased, starts, ends = letter_runs or _letter_runs(points)
        found = adds_up(text, points, None, cased, (starts, ends), languages, frozenset(), cfg)
        if found:
            return _report("evidence", text, found)
    return None


def garble_in_text(text: str, explained: frozenset[str], cfg: GarbledKnobs,
                   languages: tuple[str, ...] = (), dialect: bool = False
                   ) -> tuple[str, str, str] | None:
    """(kind, detail, excerpt) of the first salad found in one text, or None; `languages`
    are the request's (ISO codes); `dialect`, that it asked for a dialect the word lists
    do not hold (Swiss German: `_word_garble`)."""
    if not text:
        return None
    if text.isascii():
        return _ascii_garble(text, cfg, languages) \
            or _word_garble(text, languages, cfg, dialect)
    points = code_points(text)
    found = markers(text, points, cfg)
    if found:
        return _report("markers", text, found)
    scr = scripts_of(points)
    inherited = scr == INHERITED
    if inherited.any():  # a combining mark takes the script of its letter
        fill = np.maximum.accumulate(np.where(inherited, 0, np.arange(len(scr))))
        scr = scr[fill]
    found = script_switches(points, scr, explained, cfg)
    if found:
        return _report("scripts", text, found)
    cased = CASED[scr]
    starts, ends = runs(cased, scr)
    found = glued(text, cased, starts, ends, cfg)
    if found:
        return _report("glued_fragments", text, found)
    spaces = text.count(" ")
    if _may_space(spaces, cfg.garbled_spaced_letters):
        found = spaced_letters(text, points, cfg)
        if found:
            return _report("spaced_letters", text, found)
    if _may_be_noisy(text, cfg):
        found = noise(text, points, cfg)
        if found:
            return _report("noise", text, found)
    found = shuffled(points, scr, None, cfg)
    if found:
        return _report("shuffled_words", text, found)
    # Two kinds of half a finding, each screened first (`evidence.halves`).
    maybe = (_may_have_markers(text, points) + may_switch(scr, explained)
             + _may_space(spaces, max(8, cfg.garbled_spaced_letters // 2))
             + bool(len(starts) and int((ends - starts).max()) >= 16))
    if maybe >= 2 and cfg.garbled_evidence_span_chars:
        found = adds_up(text, points, scr, cased, (starts, ends), languages, explained, cfg)
        if found:
            return _report("evidence", text, found)
    return _word_garble(text, languages, cfg, dialect)


def _may_space(spaces: int, letters: int) -> bool:
    """A chain of `letters` one-character tokens one space apart (`spaced_letters`)
    needs a space between each two: at least `letters` - 1 spaces in the text."""
    return spaces >= letters - 1


def _may_be_noisy(text: str, cfg: GarbledKnobs) -> bool:
    """A text of any script could hold a noise window: as long as one, and with the
    window's share of ASCII punctuation in it all told (UTF-8 writes characters past
    ASCII in bytes past it, so the punctuation is counted in the bytes)."""
    size = cfg.garbled_noise_window_chars
    need = cfg.garbled_noise_min_symbol_share * size
    return len(text) >= size and \
        _count(text.encode("utf-8", "surrogatepass"), _ASCII_PUNCTUATION) >= need


def _word_garble(text: str, languages: tuple[str, ...], cfg: GarbledKnobs,
                 dialect: bool = False) -> tuple[str, str, str] | None:
    """The word detectors (`garbled.words`, `garbled.word_order`), in the text's
    languages and the request's; plain English is screened first (`english_screen`).
    A reply to a request for a dialect (Swiss German, whose words and function words
    are not standard German's) is not held to word statistics, only to its scripts."""
    if len(text) < 2 * _MIN_WORDS - 1:
        return None  # too short for _MIN_WORDS words: runs of letters, a gap between each
    possible = could_fire(text, cfg) if text.isascii() else None
    if possible is not None and not possible:
        return None
    found = words(text)
    if len(found) < _MIN_WORDS:
        return None
    own = "en" if possible is not None else language_of(text, found.keys)
    langs = tuple(dict.fromkeys((*((own,) if own else ()), *languages)))
    detectors = [("alternating_scripts", alternating_scripts)]
    if (own is None or has_lexicon(own)) and not dialect:  # lorem ipsum, Thai: none
        detectors = [("unknown_words", unknown_words), *detectors,
                     ("no_function_words", no_function_words)]
    for kind, detect in detectors:
        if possible is None or kind in possible:
            hit = detect(text, found, langs, cfg)
            if hit:
                return _report(kind, text, hit)
    if own == "en" and (possible is None or "word_order" in possible):
        hit = word_order(text, found, cfg)
        if hit:
            return _report("word_order", text, hit)
    return None


def _report(kind: str, text: str, found: tuple[str, int, int]) -> tuple[str, str, str]:
    detail, start, end = found
    end = min(max(end, start + 1), start + EXCERPT_CHARS)
    return kind, detail, text[start:end]


def _string_values(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string in a parsed JSON value with its path, in order (a loop, not
    recursion: arguments may nest as deep as the parser allows)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            yield where, item
        elif isinstance(item, dict):
            stack += reversed([(v, f"{where}.{k}") for k, v in item.items()])
        elif isinstance(item, list):
            stack += reversed([(v, f"{where}[{i}]") for i, v in enumerate(item)])


def _texts(record: RequestRecord) -> Iterator[tuple[str, str]]:
    """Every text of a reply, named as the finding names it."""
    yield "reasoning", record.reasoning
    yield "content", record.content
    for i, call in enumerate(record.tool_calls):
        fn = fields.section(call, "function")
        name = fn.get("name") or "?"
        raw = fn.get("arguments") or ""
        if not isinstance(raw, str):
            continue
        try:
            args = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            yield f"call {i} {name} arguments", raw
            continue
        yield from _string_values(args, f"call {i} {name}")


def find_garble(record: RequestRecord, cfg: GarbledKnobs) -> GarbleFinding | None:
    """The first salad in a reply's reasoning, content or tool-call argument values."""
    if not cfg.garbled:
        return None
    scripts = record.params.get("scripts") or ()
    languages = tuple(lang for lang in record.params.get("languages") or ()
                      if isinstance(lang, str))
    # The request's scripts, and those of the languages it names (Russian words taught in
    # a Chinese answer, a Bulgarian answer asked for in English).
    explained = frozenset(s for s in scripts if isinstance(s, str)) | language_scripts(languages)
    for field, text in _texts(record):
        found = garble_in_text(text, explained, cfg, languages,
                               bool(record.params.get("dialect")))
        if found:
            kind, detail, excerpt = found
            return GarbleFinding(field=field, kind=kind, detail=detail, excerpt=excerpt)
    return None


def _check(record: RequestRecord, cfg: GarbledKnobs) -> Found | None:
    garble = find_garble(record, cfg)
    return None if garble is None else Found(frozenset({Verdict.GARBLED}),
                                             {"garbled": garble.model_dump(mode="json")})


def _describe(found: Mapping[str, Any]) -> list[str]:
    garble = found["garbled"]
    return [] if garble is None else [f"garbled {garble.field}: {garble.kind}: {garble.detail}"]


FAMILY = Family(name="garbled", verdicts=frozenset({Verdict.GARBLED}),
                findings={"garbled": GarbleFinding | None}, describe=_describe,
                check=_check, knobs=GarbledKnobs)
