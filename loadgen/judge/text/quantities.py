"""The figures a prose answer states, each with what it counts: `12 seats`, `$1,234.50`,
`1.234,50 €`, `15 %`, `due 2026-12-01`, `at 9:30`.

Two answers to one question may word a figure any way they like ("the total is
1,234.50 EUR", "you owe €1234.5"), but they may not state another figure of the same
thing. A figure is keyed by its unit, not by the words around it: a currency (its sign
before the number, its code or its name after it: `$`, `USD`, `dollars` are one unit),
a percent, or the word that follows the number (`seats` and `seat` are one; a function
word such as `of` or `and` is no unit). Dates are keyed as dates whatever their format
(`typed_values.dates`; text written as a date that is no day is a date of no
reading, unlike any), times of day as times (`09:30` is `9:30`). A number's value is
read as `typed_values.numbers` reads it, every reading of an ambiguous grouping kept.

Two answers *contradict* each other on a unit when each states a value of it the other
does not: a figure replaced, which a reworded answer does not do. A figure only one of
them states, or one added beside the other's, is wording. A number with no unit (a
list's numbering, `1 of 3`, a count in passing) is compared only under the same words
on both sides (`total is _`): wording may add or drop such numbers freely.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from loadgen.judge.text.typed_values import nfc, placed_dates, placed_numbers

#: Currency signs, codes and names, as the one unit each stands for.
_CURRENCY = {
    "$": "USD", "us$": "USD", "usd": "USD", "dollar": "USD", "dollars": "USD",
    "€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR",
    "£": "GBP", "gbp": "GBP", "pound": "GBP", "pounds": "GBP",
    "¥": "JPY", "jpy": "JPY", "yen": "JPY", "₹": "INR", "inr": "INR", "rupees": "INR",
    "chf": "CHF", "francs": "CHF", "cad": "CAD", "aud": "AUD",
}
_PERCENT = {"%": "%", "percent": "%", "per cent": "%", "pct": "%"}
#: Words that follow numbers without being what they count ("12 of 20", "3 and 4").
_FUNCTION_WORDS = frozenset(
    "a an and are as at be but by for from has have in into is it its more less of on "
    "or out over per than that the their then this to under up was were which with "
    "without you your each every all times x".split())

_SIGN_BEFORE = re.compile(r"(US\$|[$€£¥₹])\s?$")
_AFTER = re.compile(r"\s?(%|per cent|[^\W\d_]+)", re.IGNORECASE)
_TIME = re.compile(r"(?<![\w.,:])\d{1,2}:\d{2}(?![\w:])")
_WORD = re.compile(r"[^\W\d_]+")
_CLAUSE_END = re.compile(r"[.!?;:\n](?:\s|$)|\n")


@dataclass(frozen=True, slots=True)
class Figure:
    unit: str | None  # a currency code, "%", a counted word (singular), "date", or none
    label: str  # the word before it and the word after it in its clause: "is _ eur"
    written: str
    readings: frozenset[Decimal] | frozenset[dt.date] | frozenset[str]


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _unit(text: str, start: int, end: int) -> str | None:
    """What the number written at text[start:end] counts, or None."""
    sign = _SIGN_BEFORE.search(text[max(0, start - 4):start])
    if sign:
        return _CURRENCY[sign.group(1).lower()]
    after = _AFTER.match(text, end)
    if not after:
        return None
    word = after.group(1).lower()
    if word in _PERCENT:
        return "%"
    if word in _CURRENCY:
        return _CURRENCY[word]
    if word in _FUNCTION_WORDS or (len(word) == 1 and not after.group(1).isupper()):
        return None
    return _singular(word)


def _label(text: str, start: int, end: int) -> str:
    before = _WORD.findall(_CLAUSE_END.split(text[max(0, start - 80):start])[-1])
    after = _WORD.findall(_CLAUSE_END.split(text[end:end + 80])[0])
    return f"{before[-1].lower() if before else ''} _ {after[0].lower() if after else ''}"


def figures(text: str) -> list[Figure]:
    """Every figure a text states: dates, and numbers (with their unit where they have
    one) that stand in no date, time or code."""
    text = nfc(text)
    # A date that is no day reads as none: it differs from every date (a digit of a
    # date changed past the calendar is a replaced date, not a dropped one).
    placed = list(placed_dates(text, impossible=True))
    found = [Figure("date", _label(text, *span), date.written, date.readings)
             for span, date in placed]
    taken = [span for span, _ in placed]  # in order: finditer's
    for m in _TIME.finditer(text):
        if not _inside(taken, m.start()):
            hours, minutes = m.group(0).split(":")
            found.append(Figure("time", _label(text, *m.span()), m.group(0),
                                frozenset({f"{int(hours)}:{minutes}"})))
            bisect.insort(taken, m.span())
    for (start, end), number in placed_numbers(text):
        if not _inside(taken, start):
            found.append(Figure(_unit(text, start, end), _label(text, start, end),
                                number.written, number.readings))
    return found


def _inside(spans: list[tuple[int, int]], at: int) -> bool:
    """Whether `at` falls in one of the (sorted, disjoint) spans."""
    i = bisect.bisect_right(spans, (at, sys.maxsize)) - 1
    return i >= 0 and spans[i][0] <= at < spans[i][1]


def _grouped(found: Iterable[Figure], key: Callable[[Figure], str | None]
             ) -> dict[str, list[Figure]]:
    out: dict[str, list[Figure]] = {}
    for figure in found:
        if (k := key(figure)) is not None:
            out.setdefault(k, []).append(figure)
    return out


def _unmatched(mine: list[Figure], theirs: list[Figure]) -> list[str]:
    values = frozenset().union(*(f.readings for f in theirs))
    return [f.written for f in mine if not f.readings & values]


def contradictions(mine: Iterable[Figure], theirs: Iterable[Figure]
                   ) -> list[tuple[str, str, str]]:
    """(what, mine, theirs) for each unit on which each side states a value the other
    does not (a figure replaced), and each label under which one side states a number
    of no unit the other does not (`total is _`: the same words, another figure). An empty list
    where the two agree, or only add figures of other units and labels."""
    mine, theirs = list(mine), list(theirs)
    out = []
    a, b = _grouped(mine, lambda f: f.unit), _grouped(theirs, lambda f: f.unit)
    for unit in sorted(a.keys() & b.keys()):
        only_a, only_b = _unmatched(a[unit], b[unit]), _unmatched(b[unit], a[unit])
        if only_a and only_b:
            out.append((unit, only_a[0], only_b[0]))
    a, b = (_grouped(side, lambda f: f.label if f.unit is None else None)
            for side in (mine, theirs))
    for label in sorted(a.keys() & b.keys()):
        only_a, only_b = _unmatched(a[label], b[label]), _unmatched(b[label], a[label])
        if only_a or only_b:
            out.append((f"'{label}'", (only_a or ["nothing"])[0], (only_b or ["nothing"])[0]))
    return out
