"""Unicode scripts of letters: a code-point table for the judge, and a request's scripts.

The `garbled` rule asks which writing system each letter belongs to, for every reply,
so the answer is a table looked up with numpy (one array operation per reply, whatever
its length), built once from the `regex` library's Unicode script properties. Only
letters and marks get a script: digits, punctuation, symbols, emoji and spaces are 0
(they separate words, they do not make a language).

A request's own scripts (`request_scripts`) explain the same scripts in its reply: a
user who writes in Russian gets Cyrillic back.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

import numpy as np
import regex

#: The scripts named in findings, in table order (ids from FIRST_SCRIPT); a letter of
#: any other script is "Other".
SCRIPTS: tuple[str, ...] = (
    "Latin", "Han", "Hiragana", "Katakana", "Hangul", "Bopomofo", "Cyrillic", "Greek",
    "Arabic", "Hebrew", "Syriac", "Thaana", "Devanagari", "Bengali", "Gurmukhi",
    "Gujarati", "Oriya", "Tamil", "Telugu", "Kannada", "Malayalam", "Sinhala", "Thai",
    "Lao", "Tibetan", "Myanmar", "Khmer", "Mongolian", "Georgian", "Armenian", "Ethiopic",
    "Cherokee", "Canadian_Aboriginal", "Yi", "Tifinagh", "Javanese", "Balinese",
    "Other",
)
NOT_A_LETTER = 0
INHERITED = 1  # combining marks: they belong to the letter before them
FIRST_SCRIPT = 2
SCRIPT_ID: dict[str, int] = {name: FIRST_SCRIPT + i for i, name in enumerate(SCRIPTS)}
LATIN = SCRIPT_ID["Latin"]
HAN = SCRIPT_ID["Han"]

#: Code points past this are looked up as this one (unassigned: not a letter). The
#: table covers the BMP and the CJK extension planes.
TABLE_END = 0x32400

_LETTER = regex.compile(r"[\p{L}\p{M}]+")
_BY_SCRIPT = regex.compile(
    "|".join(f"(?P<{name}>\\p{{Script={name}}}+)" for name in SCRIPTS if name != "Other")
    + r"|(?P<Inherited>\p{Script=Inherited}+)|(?P<Common>\p{Script=Common}+)")


# Letters of the Common script (the prolonged sound mark ー, ordinal indicators) are
# shared by several writing systems: like punctuation, they separate.
_SPECIAL_IDS = {"Inherited": INHERITED, "Common": NOT_A_LETTER}


@cache
def script_table() -> np.ndarray:
    """Script id of every code point below TABLE_END (uint8)."""
    every = "".join(map(chr, range(TABLE_END)))
    letter = np.zeros(TABLE_END, dtype=bool)
    for m in _LETTER.finditer(every):
        letter[m.start():m.end()] = True
    table = np.full(TABLE_END, SCRIPT_ID["Other"], dtype=np.uint8)
    for m in _BY_SCRIPT.finditer(every):
        name = m.lastgroup or "Other"
        table[m.start():m.end()] = _SPECIAL_IDS.get(name, SCRIPT_ID.get(name, 0))
    table[~letter] = NOT_A_LETTER
    table[TABLE_END - 1] = NOT_A_LETTER
    return table


@cache
def _script_bytes() -> bytes:
    """`script_table` as bytes: one character's script id is one index, no numpy call."""
    return script_table().tobytes()


@lru_cache(maxsize=1 << 16)  # words come back, and a text's words are read by several rules
def script_of(text: str) -> str:
    """The script of a word (of its first letters): the first of its first 8 characters
    that has one (`scripts_of`'s table, looked up a character at a time)."""
    if text.isascii():
        return "Latin"
    table = _script_bytes()
    last = len(table) - 1  # code points past the table read its last entry
    for char in text[:8]:
        script = table[min(ord(char), last)]
        if script >= FIRST_SCRIPT:
            return SCRIPTS[script - FIRST_SCRIPT]
    return "Other"


def code_points(text: str) -> np.ndarray:
    """The text's code points, one per character (Python string indexes)."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def scripts_of(points: np.ndarray) -> np.ndarray:
    """Script id per code point."""
    table = script_table()
    if points.dtype == np.uint8:
        return table[points]
    return table[np.minimum(points, TABLE_END - 1)]


def text_scripts(text: str) -> set[str]:
    """Names of the scripts of a text's letters."""
    if text.isascii():
        return {"Latin"} if any(c.isalpha() for c in text) else set()
    ids = np.unique(scripts_of(code_points(text)))
    return {SCRIPTS[i - FIRST_SCRIPT] for i in ids.tolist() if i >= FIRST_SCRIPT}


def message_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The texts of chat messages (content, text parts, tool-call arguments): what a
    request says, for the scripts it gives reason for and the tokens it takes."""
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [part["text"] for part in content
                      if isinstance(part, dict) and isinstance(part.get("text"), str)]
        for call in message.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                texts.append(fn["arguments"])
    return texts


def request_scripts(messages: list[dict[str, Any]]) -> list[str]:
    """Scripts of the request's message texts beyond Latin (sorted; [] for most
    requests, which are ASCII)."""
    found: set[str] = set()
    for text in message_texts(messages):
        if not text.isascii():
            found |= text_scripts(text)
    found.discard("Latin")
    return sorted(found)


@cache
def language_script(code: str) -> str | None:
    """The script a language is written in (CLDR's likely script, through langcodes), by
    the name `SCRIPTS` gives it."""
    import langcodes

    iso = langcodes.Language.get(code).maximize().script
    if not iso:
        return None
    # ISO 15924's writing systems of several scripts, by the script of their letters.
    iso = {"Hans": "Hani", "Hant": "Hani", "Jpan": "Hani", "Kore": "Hang"}.get(iso, iso)
    table = script_table()
    for name in SCRIPTS[:-1]:
        ids = np.flatnonzero(table == SCRIPT_ID[name])
        try:
            if len(ids) and regex.match(rf"\p{{Script={iso}}}", chr(int(ids[0]))):
                return name
        except regex.error:  # a script Unicode does not name
            return None
    return None


def language_scripts(codes: Any) -> frozenset[str]:
    """The scripts of the languages a request is written in or names: a request that
    asks for Russian words explains Cyrillic in a Chinese answer."""
    return frozenset(s for code in codes if isinstance(code, str)
                     and (s := language_script(code)) is not None)
