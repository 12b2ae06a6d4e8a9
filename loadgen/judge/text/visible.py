"""What a reader sees of a text: characters that render nothing are not an answer.

A reply whose content is a zero-width space survives `str.strip()`, yet shows its reader
nothing; counted as an answer, it turns the #52448 signature (stuck in the reasoning)
into a harmless `truncated`. Unicode names the characters that render nothing:
White_Space and Default_Ignorable_Code_Point (zero-width spaces and joiners, the word
joiner, BOM, soft hyphen, variation selectors, tags, the Hangul fillers). Format (Cf)
and control (Cc) characters render nothing either, and the Braille blank (U+2800) draws
an empty cell. The `regex` module carries these properties from the Unicode data, so
the list follows new Unicode versions rather than a table kept here.
"""

from __future__ import annotations

import regex

_INVISIBLE_CLASS = r"\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}\u2800"
_NOTHING_TO_SEE = regex.compile(rf"[{_INVISIBLE_CLASS}]*+")
# What may sit inside a word without showing: stripped before the loop rules compare
# words, so zero-width characters (or NUL) sprinkled into a loop do not hide it.
_HIDDEN_INSIDE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cf}\x00]+")


def is_blank(text: str, start: int = 0, end: int | None = None) -> bool:
    """True when text[start:end] shows nothing: only whitespace and invisible characters."""
    stop = len(text) if end is None else end
    return _NOTHING_TO_SEE.fullmatch(text, start, stop) is not None


def without_hidden(text: str) -> str:
    """The text without the characters that render nothing inside a word.

    ASCII text has none of them but NUL (str.isascii() is O(1) in CPython, the NUL
    search C speed), so the common case costs next to nothing.
    """
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    return _HIDDEN_INSIDE.sub("", text)
