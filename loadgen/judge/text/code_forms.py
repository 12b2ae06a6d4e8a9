"""A request's codes however a reply writes them: case, separators, look-alikes, parts.

A reply that read another request's context may write that request's code `XEHM4B` as
`xehm4b`, `X-E-H-M-4-B`, `XEH M4B`, with a Cyrillic `Х` or a fullwidth `Ｘ`, or only in
part (`EHM4B`). Matching the code's exact spelling misses all of them, so both the codes
and the reply are first *folded*: Unicode compatibility forms (NFKC: fullwidth,
mathematical and circled letters), then every character the Unicode confusables data
(the `confusable-homoglyphs` package) says looks like an ASCII letter or digit is that
letter or digit, then lower case. The folded reply is read as *groups* of letters and
digits; groups a short separator apart (spaces, dashes, dots, underscores, slashes,
colons: at most three such characters, no line break) may be one written code. Every
run of groups that starts and ends at a group's edge and holds at most 12 characters
with a digit is a *form*; a code's form is its whole folded spelling, or a part of it of
at least `min_fragment` characters (5, and three quarters of the code), that holds a
digit. A part never starts or ends inside a group: `NOW 481302` holds no part of
`NW481302`, and a date `2026-12-01` no six digits of a contract.

The folded text keeps the reply's positions where it can (each character folds to
one), so a finding quotes what the reply wrote.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache

import numpy as np
import regex

#: The longest code (loadgen.expectations.is_code).
MAX_CODE = 12
#: The shortest part of a code that names it, whatever the code's length.
MIN_FRAGMENT = 5
#: ...and the share of the code it must hold at least.
FRAGMENT_SHARE = 0.75
#: Characters that may stand between the pieces of one written code.
_SEPARATOR = regex.compile(r"[ \t\u00a0\u2007\u202f\-\u2010-\u2015\u2212_.\u00b7/\\:|]{1,3}")
_GROUP = regex.compile(r"[a-z0-9]+")
_ANY_DIGIT = regex.compile(r"[0-9]")
#: The widest stretch of text (separators included) a written code may take.
_SPAN = MAX_CODE * 4
_HIDDEN = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cf}]+")


@cache
def _table() -> dict[int, str]:
    """Code point -> the lower-case ASCII letter or digit it looks like."""
    from confusable_homoglyphs.confusables import confusables_data

    table: dict[int, str] = {ord(c): c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    for char, homoglyphs in confusables_data.items():
        if len(char) != 1:
            continue
        ascii_like = [h["c"] for h in homoglyphs
                      if len(h["c"]) == 1 and h["c"].isascii() and h["c"].isalnum()]
        if not char.isascii() and ascii_like:
            table.setdefault(ord(char), ascii_like[0].lower())
        elif char.isascii() and char.isalnum():
            for h in homoglyphs:
                glyph = h["c"]
                if len(glyph) == 1 and not glyph.isascii():
                    table.setdefault(ord(glyph), char.lower())
    return table


class Folded:
    """A text folded (NFKC, look-alikes as ASCII, lower case, invisible characters out),
    and where each folded character came from (`origin`).

    Each distinct character is folded once (a reply has a few hundred); the folded text
    is written out only when asked for, and the map of positions only when a position is
    asked for and a character folded to more or fewer than one."""

    __slots__ = ("_folds", "_sizes", "_source", "_text", "_where", "has_digit")

    def __init__(self, text: str) -> None:
        self._source = text
        self._folds: dict[str, str] | None = None
        self._text: str | None = None
        self._sizes: np.ndarray | None = None
        self._where: list[int] | None = None
        if text.isascii():
            self._text = text.lower()
            self.has_digit = _ANY_DIGIT.search(text) is not None
            return
        table = _table()
        self._folds = {c: "" if _HIDDEN.fullmatch(c) else
                       unicodedata.normalize("NFKC", c).translate(table) for c in set(text)}
        self.has_digit = any(_ANY_DIGIT.search(f) for f in self._folds.values())

    @property
    def text(self) -> str:
        if self._text is None:
            folds, source = self._folds or {}, self._source
            if all(len(f) == 1 for f in folds.values()):
                self._text = source.translate({ord(c): f for c, f in folds.items()})
            else:
                self._text = "".join(folds[c] for c in source)
                self._sizes = np.fromiter((len(folds[c]) for c in source), dtype=np.int64,
                                          count=len(source))
        return self._text

    def origin(self, i: int) -> int:
        """The position in the original text of folded character i."""
        if self._sizes is None:
            return i
        if self._where is None:
            self._where = np.repeat(np.arange(len(self._sizes)), self._sizes).tolist()
        return self._where[i]


def fold(text: str) -> str:
    """The text as `Folded` writes it."""
    return Folded(text).text


def fold_code(code: str) -> str:
    """A code as `fold` writes it."""
    return fold(code)


@dataclass(frozen=True, slots=True)
class Form:
    """One way a code may be written in a text: the folded letters and digits, and the
    span of the text that writes them."""

    folded: str
    start: int
    end: int


def forms(text: str, shortest: int = 1) -> Iterator[Form]:
    """Every run of groups a code may be written as (see the module's word).

    A form holds a digit, so only the groups that may join a group with a digit are
    read: one pass finds the groups, and each form grows from its first group while it
    stays short enough to be a code. Forms shorter than `shortest` are not given."""
    if not text:
        return
    source = Folded(text)
    if not source.has_digit:
        return
    folded = source.text
    groups = [(m.start(), m.end(), m.group()) for m in _GROUP.finditer(folded)]
    n = len(groups)

    def joins(k: int) -> bool:  # group k and group k + 1 may be one written code
        return _SEPARATOR.fullmatch(folded, groups[k][1], groups[k + 1][0]) is not None

    starts: set[int] = set()
    for k in range(n):
        if groups[k][2].isalpha():
            continue
        first = k
        while first > 0 and groups[k][1] - groups[first - 1][0] <= _SPAN and joins(first - 1):
            first -= 1
        starts.update(range(first, k + 1))
    for i in sorted(starts):
        start, end, joined = groups[i]
        if len(joined) > MAX_CODE:
            continue
        j, digit = i, not joined.isalpha()
        while True:
            if digit and len(joined) >= shortest:
                yield Form(joined, source.origin(start), source.origin(end - 1) + 1)
            if j + 1 >= n or not joins(j):
                break
            j += 1
            end, piece = groups[j][1], groups[j][2]
            joined += piece
            if len(joined) > MAX_CODE:
                break
            digit = digit or not piece.isalpha()


def fragments(code: str) -> Iterator[str]:
    """The folded code and each part of it that names it (long enough, with a digit)."""
    folded = fold_code(code)
    n = len(folded)
    shortest = max(MIN_FRAGMENT, math.ceil(FRAGMENT_SHARE * n))
    for size in range(n, shortest - 1, -1):
        for start in range(n - size + 1):
            part = folded[start:start + size]
            if any(c.isdigit() for c in part):
                yield part


class CodeIndex:
    """Which codes each written form may be: built once from a run's codes.

    `scan` reads a text for them at the cost of one lookup a group of letters and
    digits: a form grows only while it is the beginning of some code's form, so a reply
    of prose, or a hex dump of three megabytes, is passed over at C speed but for one
    set lookup a group."""

    def __init__(self) -> None:
        self._by_form: dict[str, set[str]] = {}
        self._prefixes: set[str] = set()

    def add(self, code: str) -> None:
        for part in fragments(code):
            self._by_form.setdefault(part, set()).add(code)
            self._prefixes.update(part[:k] for k in range(1, len(part) + 1))

    def codes_of(self, folded_form: str) -> set[str]:
        return self._by_form.get(folded_form, set())

    def __contains__(self, folded_form: str) -> bool:
        return folded_form in self._by_form

    def scan(self, text: str) -> Iterator[Form]:
        """Every form in the text that is some code's (whole or a part of it)."""
        if not self._by_form or not text:
            return
        source = Folded(text)
        if not source.has_digit:
            return
        folded, prefixes, by_form = source.text, self._prefixes, self._by_form
        groups = [(m.start(), m.end(), m.group()) for m in _GROUP.finditer(folded)]
        n = len(groups)
        for i, (start, end, joined) in enumerate(groups):
            if joined not in prefixes:
                continue
            j = i
            while True:
                if joined in by_form:
                    yield Form(joined, source.origin(start), source.origin(end - 1) + 1)
                if j + 1 >= n or _SEPARATOR.fullmatch(folded, end, groups[j + 1][0]) is None:
                    break
                j += 1
                end, longer = groups[j][1], joined + groups[j][2]
                if longer not in prefixes:
                    break
                joined = longer


def index_of(codes: Iterable[str]) -> CodeIndex:
    index = CodeIndex()
    for code in codes:
        index.add(code)
    return index


def states(text: str, code: str) -> bool:
    """The text writes this code whole, in any of its forms."""
    folded = fold_code(code)
    return any(form.folded == folded for form in forms(text))
