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


def fold(text: str) -> tuple[str, list[int] | None]:
    """The text folded (NFKC, look-alikes as ASCII, lower case, invisible characters
    out), and where each folded character came from (None: position for position)."""
    if text.isascii():
        return text.lower(), None
    table = _table()
    whole = unicodedata.normalize("NFKC", text)
    if len(whole) == len(text) and not _HIDDEN.search(text):
        return whole.translate(table), None
    pieces: list[str] = []
    where: list[int] = []
    for i, char in enumerate(text):
        if _HIDDEN.fullmatch(char):
            continue
        piece = unicodedata.normalize("NFKC", char).translate(table)
        pieces.append(piece)
        where += [i] * len(piece)
    return "".join(pieces), where


def fold_code(code: str) -> str:
    """A code as `fold` writes it."""
    return fold(code)[0]


@dataclass(frozen=True, slots=True)
class Form:
    """One way a code may be written in a text: the folded letters and digits, and the
    span of the text that writes them."""

    folded: str
    start: int
    end: int


def forms(text: str) -> Iterator[Form]:
    """Every run of groups a code may be written as (see the module's word)."""
    if not text:
        return
    folded, where = fold(text)
    groups = list(_GROUP.finditer(folded))
    for i, first in enumerate(groups):
        joined = first.group()
        if len(joined) > MAX_CODE:
            continue
        end = first.end()
        j = i
        while True:
            if any(c.isdigit() for c in joined):
                yield Form(joined, _at(where, first.start()), _at(where, end - 1) + 1)
            j += 1
            if j >= len(groups):
                break
            gap = folded[end:groups[j].start()]
            if not _SEPARATOR.fullmatch(gap):
                break
            joined += groups[j].group()
            end = groups[j].end()
            if len(joined) > MAX_CODE:
                break


def _at(where: list[int] | None, i: int) -> int:
    return i if where is None else where[i]


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
    """Which codes each written form may be: built once from a run's codes."""

    def __init__(self) -> None:
        self._by_form: dict[str, set[str]] = {}

    def add(self, code: str) -> None:
        for part in fragments(code):
            self._by_form.setdefault(part, set()).add(code)

    def codes_of(self, folded_form: str) -> set[str]:
        return self._by_form.get(folded_form, set())

    def __contains__(self, folded_form: str) -> bool:
        return folded_form in self._by_form


def index_of(codes: Iterable[str]) -> CodeIndex:
    index = CodeIndex()
    for code in codes:
        index.add(code)
    return index


def states(text: str, code: str) -> bool:
    """The text writes this code whole, in any of its forms."""
    folded = fold_code(code)
    return any(form.folded == folded for form in forms(text))
