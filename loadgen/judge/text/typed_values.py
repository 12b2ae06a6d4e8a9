"""Values of a type, as a reply may write them: exact strings, numbers, dates.

A known answer is checked after only the normalisation its type needs, never by the
shape of the text around it:

- **text** (an identifier to echo, a code to look up): the exact characters (Unicode NFC,
  nothing else: no case folding, no look-alike letters), as a whole token: `k3J-9xQ_a`
  is stated by `ID: k3J-9xQ_a.` and not by `k3J-9xQ_ab` or `xk3J-9xQ_a`;
- **number**: the value, whatever the grouping (`6912`, `6,912`, `6 912`, `6.912` in a
  language that groups with dots, `6912.00`) and whatever unit or currency sign stands
  beside it; a written number with more than one reading (`6,912`) is each of them;
- **date**: the day, whatever the format (`2026-04-28`, `April 28, 2026`, `28 April
  2026`, `28.04.2026`, `04/28/2026`), read by dateutil; a numeric date whose day and
  month may be swapped (`04/05/2026`) is both days.

What a reply states of a type is also how the checks find a *conflicting* value: a
second value of the same type that no part of the request explains.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from dateutil import parser as date_parser
from rapidfuzz.distance import Levenshtein

TEXT, NUMBER, DATE = "text", "number", "date"
KINDS = (TEXT, NUMBER, DATE)

# -- text -------------------------------------------------------------------------------

#: Punctuation that may close a sentence or a quotation right after a value.
_CLOSERS = frozenset(".,;:!?)]}\"'`»”’*>")
#: What may wrap a token in prose: quotes, brackets, emphasis, sentence punctuation.
_WRAPPERS = "\"'`*_()[]{}<>«»“”‘’,;:!?."


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _ident(char: str, extra: frozenset[str]) -> bool:
    """A character that would continue an identifier: a letter, a digit, a mark, or one
    of the identifier's own inner punctuation (`-` in `k3J-9x`)."""
    return char.isalnum() or unicodedata.category(char)[0] == "M" or char in extra


def states_text(text: str, value: str) -> bool:
    """`value` appears in `text` exactly, as a whole token."""
    text, value = nfc(text), nfc(value)
    if not value:
        return False
    inner = frozenset(c for c in value if not c.isalnum() and not c.isspace())
    start = text.find(value)
    while start >= 0:
        end = start + len(value)
        before, after = text[start - 1:start], text[end:end + 2]
        starts_clean = not before or not _ident(before, inner)
        ends_clean = (not after or not _ident(after[0], inner)
                      or (after[0] in _CLOSERS and (len(after) == 1
                                                    or not _ident(after[1], inner))))
        if starts_clean and ends_clean:
            return True
        start = text.find(value, start + 1)
    return False


def tokens(text: str) -> Iterator[str]:
    """The whitespace-separated tokens of a text, without what wraps them in prose."""
    for raw in nfc(text).split():
        token = raw.strip(_WRAPPERS)
        if token:
            yield token


def near_misses(text: str, value: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    """Tokens of `text` that are `value` with an edit or a few (a character changed,
    dropped, doubled, two swapped, one added), but not `value` itself: a copy of the
    answer that came back altered. Allowed tokens (the request's own other values) are
    not misses."""
    value = nfc(value)
    if len(value) < 4:
        return []
    limit = max(1, len(value) // 4)
    out: list[str] = []
    for token in tokens(text):
        if token == value or token in allowed or token in out:
            continue
        if abs(len(token) - len(value)) > limit:
            continue
        if Levenshtein.distance(token, value, score_cutoff=limit) <= limit \
                or _transposed(token, value):
            out.append(token)
    return out


def shape(text: str) -> str:
    """What kind of character stands where: `QK7T2ZP4` -> `AA9A9AA9`; letters of other
    scripts are `L`, punctuation stands for itself."""
    out = []
    for char in text:
        if char.isdigit():
            out.append("9")
        elif char.isascii() and char.isupper():
            out.append("A")
        elif char.isascii() and char.isalpha():
            out.append("a")
        elif char.isalpha():
            out.append("L")
        else:
            out.append(char)
    return "".join(out)


def same_shape(text: str, value: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    """Tokens of `text` written like `value` (`shape`: an identifier of its length and
    make-up, such as another catalog row's code) that are not `value` nor allowed. Only
    values of six characters or more have a shape worth comparing."""
    value = nfc(value)
    if len(value) < 6:
        return []
    want = shape(value)
    out: list[str] = []
    for token in tokens(text):
        if token != value and token not in allowed and token not in out \
                and len(token) == len(value) and shape(token) == want:
            out.append(token)
    return out


def kind_of(value: str) -> str:
    """The kind a fact's value is, as the workloads write them: an ISO date, a whole
    number, or text."""
    if date_value(value) is not None:
        return DATE
    if value.isascii() and value.isdigit() and not value.startswith("0"):
        return NUMBER
    return TEXT


def _transposed(a: str, b: str) -> bool:
    """`a` is `b` with two characters swapped (an edit Levenshtein counts twice)."""
    if len(a) != len(b):
        return False
    diff = [i for i in range(len(a)) if a[i] != b[i]]
    return len(diff) == 2 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


# -- numbers ------------------------------------------------------------------------------

_SPACES = "\u00a0\u202f\u2009 "
_NUMBER = re.compile(
    r"(?<![\w.,])[-−]?(?:"
    rf"\d{{1,3}}(?:[{_SPACES}]\d{{3}})+(?:[.,]\d+)?"  # 6 912 / 6 912,5
    r"|\d{1,3}(?:[,'’]\d{3})+(?:\.\d+)?"  # 6,912 / 6'912 / 6,912.50
    r"|\d{1,3}(?:\.\d{3})+(?:,\d+)?"  # 6.912 / 6.912,50
    r"|\d+(?:[.,]\d+)?"  # 6912 / 6912.5 / 6912,5
    r")(?![\w])")


@dataclass(frozen=True, slots=True)
class Number:
    written: str
    readings: frozenset[Decimal]  # every value the written form may mean
    digits: int  # digits written (the size of the number, whatever its reading)


def _readings(written: str) -> frozenset[Decimal]:
    body = written.replace("−", "-")
    sign = "-" if body.startswith("-") else ""
    body = body.lstrip("-")
    for space in _SPACES + "'’":
        body = body.replace(space, "")
    out: set[Decimal] = set()
    separators = [c for c in body if c in ".,"]
    candidates = []
    if not separators:
        candidates.append(body)
    elif len(set(separators)) == 2:  # both: the last one is the decimal mark
        last = max(body.rfind("."), body.rfind(","))
        candidates.append(body[:last].replace(",", "").replace(".", "") + "." + body[last + 1:])
    else:
        mark = separators[0]
        parts = body.split(mark)
        if len(parts) > 2 or len(parts[-1]) == 3:  # grouping (6,912 or 1.234.567)
            candidates.append("".join(parts))
        if len(parts) == 2:  # a decimal mark (6,5 or 6.912 read as six point nine)
            candidates.append(parts[0] + "." + parts[1])
    for candidate in candidates:
        try:
            out.add(Decimal(sign + candidate))
        except InvalidOperation:
            continue
    return frozenset(out)


def numbers(text: str) -> list[Number]:
    """Every number a text writes, with its possible readings."""
    return [number for _, number in placed_numbers(nfc(text))]


def placed_numbers(text: str) -> Iterator[tuple[tuple[int, int], Number]]:
    """Every number `text` (already NFC) writes, with where it stands."""
    for m in _NUMBER.finditer(text):
        written = m.group(0)
        readings = _readings(written)
        if readings:
            yield m.span(), Number(written, readings, sum(c.isdigit() for c in written))


def number_value(value: str) -> Decimal | None:
    """A fact's value as the number it is (the workload writes it plainly)."""
    try:
        return Decimal(value.replace(",", "").replace("_", ""))
    except InvalidOperation:
        return None


def same_number(written: Number, value: Decimal) -> bool:
    return any(r == value for r in written.readings)


# -- dates --------------------------------------------------------------------------------

_MONTHS = ("jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
           "|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
_ORDINAL = r"(?:st|nd|rd|th)?"
_DATE = re.compile(
    r"(?<![\w])(?:"
    r"(?P<iso>\d{4}[-/.]\d{1,2}[-/.]\d{1,2})"
    r"(?:[T ]\d{1,2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?"
    rf"|(?P<mdy>(?:{_MONTHS})\.?\s+\d{{1,2}}{_ORDINAL},?\s+\d{{4}})"
    rf"|(?P<dmy>\d{{1,2}}{_ORDINAL}(?:\s+of)?\s+(?:{_MONTHS})\.?,?\s+\d{{4}})"
    r"|(?P<num>\d{1,2}[/.]\d{1,2}[/.]\d{4})"
    r")(?![\w])", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DateMention:
    written: str
    readings: frozenset[dt.date]


@functools.lru_cache(maxsize=4096)
def _parse(text: str, **options: bool) -> dt.date | None:
    """The day a written date is (dateutil; the same few dates recur in a run's replies)."""
    try:
        return date_parser.parse(text, **options).date()
    except (ValueError, OverflowError):
        return None


def dates(text: str) -> list[DateMention]:
    """Every date a text writes, with its possible readings."""
    return [date for _, date in placed_dates(nfc(text))]


def placed_dates(text: str, impossible: bool = False
                 ) -> Iterator[tuple[tuple[int, int], DateMention]]:
    """Every date `text` (already NFC) writes, with where it stands; with `impossible`,
    also text written as a date that is no day (`2027-11-97`, `62th of November`), with
    no reading."""
    for m in _DATE.finditer(text):
        written = m.group(0)
        readings: set[dt.date | None] = set()
        if m.group("iso"):
            readings.add(_parse(m.group("iso").replace("/", "-").replace(".", "-")))
        elif m.group("num"):
            readings.add(_parse(written, dayfirst=True))
            readings.add(_parse(written, dayfirst=False))
        else:
            readings.add(_parse(written.replace(" of ", " ")))
        kept = frozenset(r for r in readings if r is not None)
        if kept or impossible:
            yield m.span(), DateMention(written, kept)


def date_value(value: str) -> dt.date | None:
    """A fact's value as the day it is (the workload writes ISO dates)."""
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None
