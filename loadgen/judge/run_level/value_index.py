"""Distinctive values that are not codes, found in replies: identifiers of other alphabets,
long numbers, made-up names.

Codes (`XEHM4B`) are found in any written form by `judge.text.code_forms`. A workload's other
distinctive values are found as they are written, after the normalisation their kind
needs and nothing more: an identifier or a name as a whole token or run of words
(Unicode NFC; a name without case), a number whatever its grouping (`633751`,
`633,751`). A value shorter than `MIN_CHARS` names no request and is not indexed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from loadgen.expectations import is_code
from loadgen.judge.text.typed_values import nfc, numbers, tokens

MIN_CHARS = 6


def normal(value: str) -> str:
    """A value as the index keys it: NFC, case folded, whitespace collapsed, a number's
    digits alone."""
    text = " ".join(nfc(value).split())
    if text.isascii() and text.replace(",", "").isdigit():
        return text.replace(",", "")
    return text.casefold()


@dataclass(frozen=True, slots=True)
class Found:
    key: str  # the value as indexed (`normal`)
    written: str


class ValueIndex:
    """Which non-code distinctive values a text writes."""

    def __init__(self) -> None:
        self._words: dict[int, set[str]] = {}  # words in a value -> its keys
        self._numbers: set[str] = set()

    @staticmethod
    def indexed(value: str) -> bool:
        return not is_code(value) and len(value.strip()) >= MIN_CHARS

    def add(self, value: str) -> None:
        key = normal(value)
        if key.isdigit():
            self._numbers.add(key)
        else:
            self._words.setdefault(len(key.split(" ")), set()).add(key)

    def __bool__(self) -> bool:
        return bool(self._words or self._numbers)

    def scan(self, text: str) -> Iterator[Found]:
        if not text:
            return
        if self._numbers:
            for n in numbers(text):
                for reading in n.readings:
                    digits = str(reading)
                    if digits in self._numbers:
                        yield Found(digits, n.written)
        if not self._words:
            return
        words = list(tokens(text))
        folded = [w.casefold() for w in words]
        for size, keys in self._words.items():
            for i in range(len(words) - size + 1):
                key = " ".join(folded[i:i + size])
                if key in keys:
                    yield Found(key, " ".join(words[i:i + size]))
