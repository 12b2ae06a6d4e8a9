"""Repetition a request asks for: "write this sentence ten times" is no loop.

A reply that restates one sentence a dozen times and stops is a loop, unless the
request asked for exactly that. The request asks when its last user message quotes the
sentence (in any quotation marks, or after a colon at its end) and states a count: in
digits, or in words of one of the request's languages (`num2words`, for the numbers 2
to 100). What the record keeps (`params.asked_repetition`) is the quoted sentences,
folded, and the largest count; the loop rule then lets a reply repeat one of them as
many times as asked (and once more: a model may write the example before the copies).
"""

from __future__ import annotations

from functools import cache
from typing import Any, Protocol

import regex

from loadgen.judge.text.scripts import message_texts

_QUOTED = regex.compile(r"\"([^\"]{6,400})\"|“([^”]{6,400})”|«\s*([^»]{6,400}?)\s*»"
                        r"|„([^“”]{6,400})[“”]|'([^']{6,400})'|「([^」]{6,400})」"
                        r"|:\s*([^:\n]{6,400})$")
_DIGITS = regex.compile(r"(?<!\d)\d{1,4}(?!\d)")
_NOT_WORD = regex.compile(r"[^\p{L}\p{N}]+")
_MAX_COUNT = 1000


def fold(text: str) -> str:
    """Letters and digits, lower case, one space between words."""
    return _NOT_WORD.sub(" ", text.casefold()).strip()


@cache
def _number_words(lang: str) -> dict[str, int]:
    try:
        from num2words import num2words
    except ImportError:  # pragma: no cover - a dependency of the project
        return {}
    words: dict[str, int] = {}
    for n in range(2, 101):
        try:
            words[fold(num2words(n, lang=lang))] = n
        except (NotImplementedError, OverflowError, KeyError, ValueError, TypeError):
            return words
    return words


def _counts(text: str, languages: list[str]) -> list[int]:
    found = [int(d) for d in _DIGITS.findall(text) if 2 <= int(d) <= _MAX_COUNT]
    folded = f" {fold(text)} "
    for lang in languages:
        found += [n for word, n in _number_words(lang).items() if f" {word} " in folded]
    return found


def asked_repetition(messages: list[dict[str, Any]], languages: list[str]
                     ) -> dict[str, Any] | None:
    """The sentences the last user message asks to be repeated, and how many times."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        return None
    texts = message_texts(users[-1:])
    text = "\n".join(texts)[-4000:]
    counts = _counts(text, languages)
    if not counts:
        return None
    quoted = [fold(next(g for g in m.groups() if g)) for m in _QUOTED.finditer(text)]
    quoted = [q for q in quoted if len(q.split()) >= 2]
    if not quoted:
        return None
    return {"sentences": sorted(set(quoted)), "times": max(counts)}


class _Loop(Protocol):
    """A loop as the loop family found it (`loops.LoopFinding`)."""

    @property
    def field(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def repeats(self) -> int: ...


def loop_was_asked(loop: _Loop, asked: Any) -> bool:
    """The loop repeats a sentence the request quoted, no more often than it asked."""
    if not isinstance(asked, dict) or loop.field != "content":
        return False
    times = asked.get("times")
    sentences = asked.get("sentences")
    if not isinstance(times, int) or not isinstance(sentences, list):
        return False
    unit = fold(loop.unit)
    return loop.repeats <= times + 1 and any(
        isinstance(s, str) and s and s in unit and len(s) >= 0.8 * len(unit)
        for s in sentences)
