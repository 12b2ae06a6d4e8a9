"""Loops: text that goes round in circles (`reasoning_loop`, `tool_args_loop`).

A *repetition* is looked for over the tail of a text three ways:

- period: the tail repeats one unit of characters exactly, a unit of
  `loop_min_period_chars`..`loop_max_period_chars` at least `loop_min_repeats` times
  over at least `loop_min_chars` ("0000..." too: it repeats with any multiple of 1);
- counted period: the same once the numbering of the repeats is seen through: a bare
  number ("Attempt 5:", "Step 6.", "#7", "(8)", "9th") is one placeholder, so a loop
  that counts its own repeats is still a period;
- n-gram: a word n-gram (`ngram_words`) seen at least `ngram_min_repeats` times in the
  last `ngram_tail_words` words, the words case folded and their numbering (numbers,
  number words, Roman numerals, single letters used as labels) seen through.

A repetition is a loop by what it does, not by being there:

- A *template* walks through values where a loop returns to the same ones. Novelty
  measures it: the share of a repeat's words that the repetition has not shown before
  (a new account, amount, date, name). Numbering is never new; a number that
  neither steps evenly nor returns to earlier values is. A novelty of at least
  `template_min_novelty` (content, tool-call arguments) or
  `reasoning_template_min_novelty` (reasoning, which restates where an answer lists)
  makes a template.
- *Cut*: the reply stopped by `length` (or by any finish but stop and tool_calls).
  #52448's loops run to max_tokens: any repetition that is not a template and reaches
  the thresholds above is a loop, in the reasoning as in the content.
- *Ended*: the reply finished. Structured data that ends (a grid, a matrix,
  identical records, a table) is not a loop by itself; prose (sentences) repeated at
  least `loop_ended_min_repeats` times is, like a reasoning that restates one sentence a
  dozen times and then answers.

Loops that are not verbatim (restated in other words, counted on, an answer written
again and again) are `judge.reply.restatement`'s (`find_meaning_loop`), judged over the whole
run in the run-level pass (`run_level.restated`): their cost is not the hot loop's.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import regex
from pydantic import Field

from loadgen.judge.reply.asked import loop_was_asked
from loadgen.judge.reply.family import Family, Finding, Found, Ordered
from loadgen.judge.reply.finish import is_stuck
from loadgen.judge.reply.restatement import RestateKnobs, find_restatement
from loadgen.judge.text.prose import is_prose
from loadgen.judge.text.visible import without_hidden
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict


class LoopKnobs(RestateKnobs):
    """The loop family's knobs: a tail that repeats a period, or an n-gram that keeps
    coming back, unless each repeat brings enough new words to be a template (and, from
    `RestateKnobs`, loops by meaning)."""

    loop_min_period_chars: int = Field(default=8, ge=1, le=100_000)
    loop_max_period_chars: int = Field(default=2000, ge=1, le=1_000_000)
    loop_min_repeats: int = Field(default=4, ge=2, le=1_000_000)
    loop_min_chars: int = Field(
        default=200, ge=1, description="A loop must cover at least this many tail characters."
    )
    ngram_words: int = Field(default=8, ge=2, le=1000)
    ngram_min_repeats: int = Field(default=6, ge=2, le=1_000_000)
    ngram_tail_words: int = Field(default=400, ge=10, le=10_000_000)
    loop_ended_min_repeats: int = Field(
        default=6, ge=2, le=1_000_000,
        description="In a reply that finished (stop, tool_calls), prose must repeat this "
        "many times to be a loop; structured data that ends never is by itself.",
    )
    template_min_novelty: float = Field(
        default=0.05, ge=0, le=1,
        description="A repetition in the content or a tool-call argument is a template, "
        "not a loop, when at least this share of each repeat's words is new (values it had not "
        "shown before; numbering is never new).",
    )
    reasoning_template_min_novelty: float = Field(
        default=0.1, ge=0, le=1,
        description="The same for the reasoning, which restates where an answer lists.",
    )

    ORDERED: ClassVar[Ordered] = (("loop_min_period_chars", "loop_max_period_chars", False),)


class LoopFinding(Finding):
    """Where a loop was found, for the report's forensics."""

    field: str = ""
    kind: str = ""  # "period", "counted period", "ngram", or a loop by meaning's kind
    unit: str = ""
    repeats: int = 0


FINISHED = frozenset({"stop", "tool_calls"})

# Where numbering stood in a word or text: NUL, which `without_hidden` takes out of the
# text first, so no reply can write one of its own.
PLACEHOLDER = "\x00"


@dataclass(frozen=True, slots=True)
class Repetition:
    """A unit the tail of a text repeats: a loop or a template, to be judged."""

    kind: str
    unit: str
    repeats: int
    novelty: float  # share of a repeat's words that are new (see the module doc)


# ------------------------------------------------------------------------- numbering

_EDGE = "\"'`“”‘’«»()[]{}<>#№:;.,!?*_~/\\|-–—"
_ORDINAL = ("st", "nd", "rd", "th")
_CARDINALS = ("zero one two three four five six seven eight nine ten eleven twelve "
              "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty").split()
_ORDINALS = ("zeroth first second third fourth fifth sixth seventh eighth ninth tenth "
             "eleventh twelfth thirteenth fourteenth fifteenth sixteenth seventeenth "
             "eighteenth nineteenth twentieth").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_NUMBER_WORDS: dict[str, int] = {
    **{w: i for i, w in enumerate(_CARDINALS)},
    **{w: i for i, w in enumerate(_ORDINALS)},
    **{w: 20 + 10 * i for i, w in enumerate(_TENS)},
    **{w[:-1] + "ieth": 20 + 10 * i for i, w in enumerate(_TENS)},
    "hundred": 100, "hundredth": 100, "thousand": 1000, "thousandth": 1000,
    # Letters spelled out label repeats too: the Greek alphabet, the NATO one.
    **{w: i for i, w in enumerate(
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron "
        "pi rho sigma tau upsilon phi chi psi omega".split(), start=1)},
    **{w: i for i, w in enumerate(
        "alfa bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike "
        "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
        "zulu".split(), start=1)},
}
_ROMAN = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUE = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def _roman(numeral: str) -> int:
    total = peak = 0
    for ch in reversed(numeral):
        value = _ROMAN_VALUE[ch]
        total += value if value >= peak else -value
        peak = max(peak, value)
    return total


def numbering_value(core: str) -> int | None:
    """The number a token counts with when it labels a repeat, or None.

    Integers ("5", "05", "５", "1,005", "5th", "0x1f", "3/20", "2.3", "120.50"), a word or
    letter glued to a small number ("Attempt-5", "iter_5", "step5", "v5", "Q3"), number
    words ("five", "fifth", "twenty-one", "delta"), Roman numerals ("XIV") and single
    letters ("b"). Whether it counts (a counter) or is data (an amount) is for `_walks`
    to tell, repeat after repeat. Dates, times and ids ("2026-01-05", "12:30",
    "INV-1001", "A00005") are values: a walk through them is a template.
    """
    if not core or len(core) > 16:
        return None
    if core.isdecimal():  # any script's digits
        return int(core) if len(core) <= 12 else None
    if core.isascii():
        match = _NUMBERING.fullmatch(core)
        if match is not None:
            return _labelled_number(match)
        if len(core) == 1:
            return ord(core.lower()) - 96 if core.isalpha() else None
        if core.isupper() and _ROMAN.fullmatch(core):
            return _roman(core)
    low = core.lower()
    value = _NUMBER_WORDS.get(low)
    if value is None and "-" in low:
        parts = [_NUMBER_WORDS.get(p) for p in low.split("-")]
        if all(p is not None for p in parts):
            value = sum(parts)  # type: ignore[arg-type]
    return value


# A number as it labels or counts: with thousands separators or a fraction part, hex,
# an ordinal, "k/n"; after a word or a letter ("Attempt-5", "v5").
_NUMBERING = re.compile(
    r"(?:(?P<label>[A-Za-z]{1,12})[-#_]?)?"
    r"(?P<number>0[xX][0-9a-fA-F]{1,8}|[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]{1,3})?"
    r"|[0-9]{1,9}(?:\.[0-9]{1,3}){0,3})"
    r"(?:st|nd|rd|th)?(?:/[0-9]{1,6})?")


def _labelled_number(match: re.Match[str]) -> int | None:
    label, number = match.group("label"), match.group("number")
    if number[:2] in ("0x", "0X"):
        return None if label else int(number, 16)
    digits = number.replace(",", "").replace(".", "")
    if label is not None:
        # A letter with a few digits ("v5", "Q3"), or a word in lower or title case
        # ("step5", "Attempt-5"): labels. Upper-case codes ("INV-1001", "A00005") and
        # long numbers after a letter are ids.
        small = len(digits) <= (3 if len(label) == 1 else 4) and "." not in number
        if not small or (len(label) > 1 and not (label.islower() or label.istitle())):
            return None
    return int(digits)


def word_key(word: str) -> tuple[str, str, int | None]:
    """A word as the loop rules compare it: (shape, value, number).

    `value`: case folded, without the punctuation around it, numbering a placeholder
    ("Step" "5:" -> "step" "\\0", number 5), so "Attempt 5: re-read the request." and
    "Attempt 6: re-read the request!" are the same words. `shape`: also every other word
    with a digit a placeholder (an id, an amount, a date), so a repeat that carries a
    new id each time is found as a repetition, then judged by its values.
    """
    if len(word) <= 32:  # words come back: the short ones are worth remembering
        return _short_word_key(word)
    return _word_key(word)


def _word_key(word: str) -> tuple[str, str, int | None]:
    core = word.strip(_EDGE)
    if not core:
        return word, word, None  # punctuation alone: "-", "|", "{"
    number = numbering_value(core)
    value = core.lower()
    if number is not None:
        return PLACEHOLDER, value, number
    if _DIGIT.search(core):
        return PLACEHOLDER, value, None
    return value, value, None


_short_word_key = lru_cache(maxsize=1 << 15)(_word_key)
_DIGIT = re.compile(r"\d")


# A bare number in running text: not part of an amount, a date, a time or an id. The
# first digit comes first and the look back after it, so the engine skips to digits at
# C speed (the `regex` module does so some ten times faster than `re` here).
_BARE_NUMBER = regex.compile(
    r"[0-9](?<![A-Za-z0-9.,:/-][0-9])[0-9]{0,8}(?:st|nd|rd|th)?(?![A-Za-z0-9]|[.,:/-][0-9])")


def _walks(values: list[int]) -> bool:
    """Numbers that neither step evenly (a counter) nor return to earlier ones (a loop's
    few values): a template's data, e.g. a row's count.

    Three numbers have two steps, and "the commonest step is under half of them" never
    holds for two: three numbers walk when all three differ and so do their steps (else
    four records with distinct amounts would be a loop where three and five are not,
    with the repeat keys lowered to reach them)."""
    if len(set(values)) * 2 <= len(values):
        return False
    steps = Counter(b - a for a, b in itertools.pairwise(values))
    most = steps.most_common(1)[0][1]
    if len(values) == 3:
        return most == 1 and len(set(values)) == 3
    return most * 2 < len(values) - 1


# ---------------------------------------------------------------------- detectors


def tail_period_loop(
    text: str, min_period: int, max_period: int, min_repeats: int, min_chars: int
) -> tuple[str, int] | None:
    """Shortest unit that the text's tail repeats, as (unit, repeats), or None.

    Candidates come from earlier occurrences of the last `min_period` characters (found
    with str.rfind, i.e. C speed), so a healthy text costs a few scans, not a
    quadratic search.
    """
    n = len(text)
    if n < max(min_chars, min_period * min_repeats):
        return None
    probe = text[n - min_period:]
    lo = max(0, n - min_period - max_period)
    hi = n - 1
    while True:
        i = text.rfind(probe, lo, hi)
        if i < 0:
            return None
        period = n - min_period - i
        hi = i + min_period - 1
        if period < min_period:
            continue
        unit = text[n - period:]
        start = n - period
        repeats = 1
        while start - period >= 0 and text[start - period:start] == unit:
            start -= period
            repeats += 1
        if repeats >= min_repeats and repeats * period >= min_chars:
            return unit, repeats


def _exact_period(text: str, cfg: LoopKnobs) -> Repetition | None:
    hit = tail_period_loop(text, cfg.loop_min_period_chars, cfg.loop_max_period_chars,
                           cfg.loop_min_repeats, cfg.loop_min_chars)
    return Repetition("period", hit[0], hit[1], 0.0) if hit else None


def _counted_period(text: str, cfg: LoopKnobs, repeats_wanted: int) -> Repetition | None:
    """A tail period once bare numbers are one placeholder; novelty from the numbers
    that walk (a counter steps, a loop's numbers return, a table's numbers walk)."""
    lo, hi = cfg.loop_min_period_chars, cfg.loop_max_period_chars
    # A healthy tail has no period at all, not even twice over: found on a short
    # window first, so only a repetition pays for the long one.
    glimpse = _BARE_NUMBER.sub(PLACEHOLDER, text[-(2 * hi + lo):])
    if PLACEHOLDER not in glimpse or tail_period_loop(glimpse, lo, hi, 2, 0) is None:
        return None
    window = text[-hi * (repeats_wanted + 1):]
    masked = _BARE_NUMBER.sub(PLACEHOLDER, window)
    hit = tail_period_loop(masked, lo, hi, cfg.loop_min_repeats, cfg.loop_min_chars)
    if hit is None:
        return None
    unit, repeats = hit
    per_repeat = unit.count(PLACEHOLDER)
    if per_repeat == 0:
        return Repetition("period", unit, repeats, 0.0)
    # The numbers of the last repeats (64 tell a counter from data as well as 1000 do).
    judged = min(repeats, 64) * per_repeat
    mine = [int(n.rstrip("stndrh")) for n in _BARE_NUMBER.findall(window)[-judged:]]
    slots = [mine[j::per_repeat] for j in range(per_repeat)]
    walking = sum(1 for vals in slots if _walks(vals))
    last = iter(str(v) for v in mine[-per_repeat:])
    shown = "".join(part + next(last, "") for part in unit.split(PLACEHOLDER))
    return Repetition("counted period", shown, repeats,
                      walking / max(1, len(unit.split())))


def _tail_words(text: str, tail_words: int) -> list[str]:
    parts = text.rsplit(None, tail_words)  # splits from the end only: C speed, tail only
    return parts[1:] if len(parts) > tail_words else parts


def _novelty(units: list[range], values: list[str], numbers: list[int | None],
             known: frozenset[str] = frozenset()) -> float:
    """Mean share of a repeat's words that the repetition had not shown before.

    A word is new when its value was not in an earlier repeat. A number is new when it
    walks (see `_walks`): the k-th number of each repeat, among the repeats that hold
    as many numbers, is one slot; a number outside those repeats is new when its value
    is. A number the request holds (`known`, its `params.values`) is new the first time:
    a template walks the request's values, even consecutive ids; a repetition each of
    whose repeats shows a value of the request not shown before is a template whole.
    """
    numbered = [[a for a in unit if numbers[a] is not None] for unit in units]
    per_unit = Counter(len(slots) for slots in numbered).most_common(1)[0][0]
    same = [slots for slots in numbered if len(slots) == per_unit]
    aligned: set[int] = set()
    walking: set[int] = set()
    if len(same) > 2:
        for k in range(per_unit):
            slot = [slots[k] for slots in same]
            aligned.update(slot)
            if _walks([numbers[a] or 0 for a in slot]):
                walking.update(slot)
    seen = {values[a] for a in units[0]}
    shares = []
    walks_request = bool(known)
    for unit in units[1:]:
        new = sum(1 for a in unit if a in walking or (
            (a not in aligned or values[a] in known) and values[a] not in seen))
        walks_request &= any(values[a] in known and values[a] not in seen for a in unit)
        seen.update(values[a] for a in unit)
        shares.append(new / len(unit))
    if walks_request and shares:
        return 1.0  # every repeat shows a value of the request it had not shown: a walk
    return sum(shares) / len(shares) if shares else 0.0


def _may_repeat(shapes: list[str], n: int, min_repeats: int) -> bool:
    """Some n-gram of these shapes could occur `min_repeats` times: each of its n words
    then occurs that often (once per occurrence, at distinct places), so n words in a row
    that each do must be there. Cheaper than counting the n-grams, and a healthy tail's
    frequent words (the, of, to) seldom stand n in a row."""
    counts = Counter(shapes)
    common = {shape for shape, count in counts.items() if count >= min_repeats}
    if not common:
        return False
    return b"\x01" * n in bytes(map(common.__contains__, shapes))


def ngram_repetitions(text: str, n: int, min_repeats: int, tail_words: int,
                      known: frozenset[str] = frozenset()) -> Iterator[Repetition]:
    """The word n-grams (by shape) seen at least min_repeats times in the tail, most
    frequent first, one per region of the tail (the n-grams of one loop are rotations
    of each other)."""
    words = _tail_words(text, tail_words)
    if len(words) < n + min_repeats - 1:
        return  # too few words
    lengths = list(map(len, words))
    if sum(lengths) > 24 * len(words):
        return  # a script written without spaces: periods read it
    # The common case, every word short: the cached keys straight from C (map).
    keyed = (list(map(_short_word_key, words)) if max(lengths) <= 32
             else [word_key(w) for w in words])
    shapes = [k[0] for k in keyed]
    if not _may_repeat(shapes, n, min_repeats):
        return  # a healthy tail: no n-gram can come back often enough
    grams = list(zip(*(shapes[i:] for i in range(n)), strict=False))
    counts = Counter(grams)
    if max(counts.values()) < min_repeats:
        return  # a healthy tail: nothing comes back often enough
    frequent = {g: c for g, c in counts.items() if c >= min_repeats}
    values = [k[1] for k in keyed]
    numbers = [k[2] for k in keyed]
    starts: dict[tuple[str, ...], list[int]] = {g: [] for g in frequent}
    for i, gram in enumerate(grams):
        if gram in starts:
            starts[gram].append(i)
    covered: list[range] = []
    for gram, count in sorted(frequent.items(), key=lambda gc: -gc[1]):
        where = starts[gram]
        if any(where[0] in region for region in covered):
            continue
        covered.append(range(where[0], where[-1] + n))
        units = [range(a, b) for a, b in itertools.pairwise(where)]
        shown = " ".join(words[a] for a in units[-1])
        yield Repetition("ngram", shown, count, _novelty(units, values, numbers, known))


def ngram_loop(text: str, n: int, min_repeats: int, tail_words: int,
               templates: bool = False, min_novelty: float = 0.05
               ) -> tuple[str, int] | None:
    """The tail's most repeated word n-gram as (its unit, repeats), if it repeats at
    least min_repeats times; with `templates`, None when it is a template (a novelty of
    at least min_novelty: each repeat brings new values)."""
    for rep in ngram_repetitions(text, n, min_repeats, tail_words):
        if templates and rep.novelty >= min_novelty:
            return None
        return rep.unit, rep.repeats
    return None


# --------------------------------------------------------------------------- judging

def _is_loop(rep: Repetition, cfg: LoopKnobs, cut: bool, min_novelty: float) -> bool:
    if rep.novelty >= min_novelty:
        return False  # a template: it walks through values
    if cut:
        return rep.kind != "ngram" or rep.repeats >= cfg.ngram_min_repeats
    return rep.repeats >= cfg.loop_ended_min_repeats and is_prose(rep.unit)


def _repetitions(text: str, cfg: LoopKnobs, cut: bool,
                 known: frozenset[str] = frozenset()) -> Iterator[Repetition]:
    wanted = cfg.loop_min_repeats if cut else max(cfg.loop_min_repeats,
                                                  cfg.loop_ended_min_repeats)
    exact = _exact_period(text, cfg)  # over the whole text: the report counts every repeat
    if exact is not None:
        yield exact
    # The other rules read the tail only: as much as `wanted` repeats of the longest unit,
    # or the n-gram tail, without the characters that hide inside words.
    window = max(cfg.loop_max_period_chars * (wanted + 1), cfg.ngram_tail_words * 16)
    raw_tail = text[-window:]
    tail = without_hidden(raw_tail)
    if tail is not raw_tail and exact is None:
        exact = _exact_period(tail, cfg)
        if exact is not None:
            yield exact
    counted = _counted_period(tail, cfg, wanted)
    if counted is not None and counted.unit != getattr(exact, "unit", None):
        yield counted
    least = cfg.ngram_min_repeats if cut else min(cfg.ngram_min_repeats,
                                                  cfg.loop_ended_min_repeats)
    yield from ngram_repetitions(tail, cfg.ngram_words, least, cfg.ngram_tail_words, known)


def _too_short(text: str, cfg: LoopKnobs, cut: bool) -> bool:
    """Too short for any repetition `_repetitions` finds (a tool call's `plan`, a short
    answer): a period needs `tail_period_loop`'s least length (the tails it reads, with
    numbers or hidden characters taken out, are never longer than the text), and an
    n-gram repeated needs n + repeats - 1 words, each at least one character and one
    white space apart."""
    least = cfg.ngram_min_repeats if cut else min(cfg.ngram_min_repeats,
                                                  cfg.loop_ended_min_repeats)
    n = len(text)
    return n < max(cfg.loop_min_chars, cfg.loop_min_period_chars * cfg.loop_min_repeats) \
        and n < 2 * (cfg.ngram_words + least - 1) - 1


def text_loop(text: str, cfg: LoopKnobs, *, cut: bool, min_novelty: float,
              known: frozenset[str] = frozenset()) -> tuple[str, str, int] | None:
    """(kind, unit, repeats) when the text goes round in circles (see the module doc).

    `cut`: the reply stopped while this text was being written. `min_novelty`: the
    novelty from which a repetition is a template. `known`: the request's numbers and
    codes (`request_values`), new in a repeat the first time it shows them.
    """
    if _too_short(text, cfg, cut):
        return None
    for rep in _repetitions(text, cfg, cut, known):
        if _is_loop(rep, cfg, cut, min_novelty):
            return rep.kind, rep.unit, rep.repeats
    return None


def find_loop(record: RequestRecord, cfg: LoopKnobs) -> LoopFinding | None:
    """The first loop in the reasoning, then the content.

    A reply that did not finish (length, or any finish but stop and tool_calls) is cut
    in every part: one visible character of content after a reasoning that ran in
    circles to max_tokens does not make that reasoning finished.
    """
    cut = record.finish_reason not in FINISHED
    values = request_values(record)
    known = frozenset(v.strip(".,'’-").lower() for v in values)
    for field, min_novelty in (("reasoning", cfg.reasoning_template_min_novelty),
                               ("content", cfg.template_min_novelty)):
        text = getattr(record, field)
        if text:
            hit = text_loop(text, cfg, cut=cut, min_novelty=min_novelty, known=known)
            if hit:
                kind, unit, repeats = hit
                return LoopFinding(field=field, kind=kind, unit=unit, repeats=repeats)
    return None


def find_meaning_loop(record: RequestRecord, cfg: LoopKnobs) -> LoopFinding | None:
    """A loop by meaning (`judge.reply.restatement`: restated in other words, counted on, an
    answer written again and again) in the reasoning or the content, or None. Judged in
    the run-level pass (`run_level.restated`), not as each reply completes: comparing a
    long reply's sentences with each other costs several times the rest of `classify`,
    which the load generator's loop must not pay per reply."""
    cut = record.finish_reason not in FINISHED
    values = request_values(record)
    for field, min_novelty in (("reasoning", cfg.reasoning_template_min_novelty),
                               ("content", cfg.template_min_novelty)):
        text = getattr(record, field)
        if text:
            meant = find_restatement(text, cfg, cut=cut, min_novelty=min_novelty,
                                     request_values=values)
            if meant is not None:
                return LoopFinding(field=field, kind=meant.kind, unit=meant.unit,
                                   repeats=meant.repeats)
    return None


def request_values(record: RequestRecord) -> list[str]:
    """The numbers and codes the request holds (`params.values`, the facts of
    `expected`): the values a template walks through, where a loop invents its own."""
    values = record.params.get("values")
    out = [str(v) for v in values] if isinstance(values, list) else []
    facts = (record.expected or {}).get("facts")
    if isinstance(facts, dict):
        out += [str(v) for v in facts.values() if isinstance(v, str | int | float)]
    return out


def _check(record: RequestRecord, cfg: LoopKnobs) -> Found | None:
    verdicts: set[Verdict] = set()
    findings: dict[str, object] = {}
    loop = find_loop(record, cfg)
    if loop is not None and loop_was_asked(loop, record.params.get("asked_repetition")):
        # "write it ten times", done as asked
        findings["asked_repetition"] = loop.model_dump(mode="json")
        loop = None
    if loop is not None:
        verdicts.add(Verdict.REASONING_LOOP)
        findings["loop"] = loop.model_dump(mode="json")
    if is_stuck(record):
        # A reasoning that runs in circles and one that was merely long read the same
        # by their finish; the report tells them apart.
        findings["stuck"] = "looping" if loop is not None and loop.field == "reasoning" \
            else "long (no loop in the reasoning)"
    return Found(frozenset(verdicts), findings) if verdicts or findings else None


def _describe(found: Mapping[str, Any]) -> list[str]:
    lines = [f"stuck: {found['stuck']}"] if found["stuck"] else []
    if (loop := found["loop"]) is not None:
        lines.append(f"loop in the {loop.field}: {loop.unit[:80]!r} x{loop.repeats} "
                     f"({loop.kind})")
    return lines


#: `reasoning_loop` as each reply completes (loops by meaning: `run_level.restated`); it
#: also says whether a reply stuck in its reasoning went round in circles.
FAMILY = Family(
    name="loops", verdicts=frozenset({Verdict.REASONING_LOOP}),
    findings={"loop": LoopFinding | None, "asked_repetition": LoopFinding | None,
              "stuck": str | None},
    describe=_describe, check=_check, knobs=LoopKnobs)
