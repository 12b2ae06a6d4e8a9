"""The `scripts` detector: letters of scripts the request gives no reason for, meeting
inside words or a space apart."""

from __future__ import annotations

from functools import cache

import numpy as np

from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.garbled.points import SPACES, TABLE_SIZE, lookup
from loadgen.judge.text.scripts import (
    FIRST_SCRIPT,
    LATIN,
    NOT_A_LETTER,
    SCRIPT_ID,
    SCRIPTS,
)

_CJK = ("Han", "Hiragana", "Katakana", "Bopomofo")
_GREEK = SCRIPT_ID["Greek"]
_EXPLAINED_PAIRS = [
    *((a, b) for a in _CJK for b in _CJK),  # Japanese, and Chinese with zhuyin
    ("Han", "Hangul"),  # Korean with hanja
    *(("Latin", s) for s in ("Hiragana", "Katakana", "Hangul", "Greek")),
    # Scripts written without spaces between words take Latin terms glued in.
    *(("Latin", s) for s in ("Thai", "Lao", "Khmer", "Myanmar", "Tibetan")),
    *(("Greek", s) for s in _CJK),  # math and units
]


@cache
def _explained(scripts: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """(script id -> explained, (id, id) -> a pair that is language) for a request."""
    ids = [SCRIPT_ID[s] for s in scripts | {"Latin", "Han"} if s in SCRIPT_ID]
    alone = np.zeros(TABLE_SIZE, dtype=bool)
    alone[ids] = True
    pairs = alone[:, None] & alone[None, :]
    for a, b in _EXPLAINED_PAIRS:
        pairs[SCRIPT_ID[a], SCRIPT_ID[b]] = pairs[SCRIPT_ID[b], SCRIPT_ID[a]] = True
    return alone, pairs


def _symbols(points: np.ndarray, scr: np.ndarray) -> np.ndarray:
    """The script ids with every lone Greek letter that a word does not end with (α, Σ,
    Ω: a symbol of mathematics or a unit, in any language) taken as no letter: one that
    begins a word, perhaps with a particle after it (θ는), or follows a clitic of one or
    two letters (Arabic وα, "and α"). A Greek letter glued after a word of another
    script (жλ) is not a symbol."""
    greek = scr == _GREEK
    if not greek.any():
        return scr
    lone = greek.copy()
    lone[1:] &= ~greek[:-1]
    lone[:-1] &= ~greek[1:]
    out = scr.copy()
    for i in np.flatnonzero(lone).tolist():
        start = i
        while start > 0 and scr[start - 1] >= FIRST_SCRIPT:
            start -= 1
        if start == i or (i - start <= 2 and _clitic(points[start:i], int(scr[start]))):
            out[i] = NOT_A_LETTER
    return out


def _clitic(points: np.ndarray, script: int) -> bool:
    """One or two letters a language that writes its function words onto the next word
    has as a function word (Arabic و, ب; Hebrew ו, ה: the languages whose function words
    take little of running text as words of their own, by wordfreq's statistics)."""
    from loadgen.judge.reply.garbled.words import affixing, candidates
    from loadgen.judge.text import language

    word = "".join(map(chr, points.tolist())).casefold()
    return any(word in language.function_words(lang)
               for lang in candidates(SCRIPTS[script - FIRST_SCRIPT], ()) if affixing(lang))


def may_switch(scr: np.ndarray, explained: frozenset[str]) -> bool:
    """Some letter of a script the request does not explain: `script_switches` finds
    nothing (at any threshold) where there is none. Its lone Greek symbols only take
    letters away, so the script ids before them answer for it too."""
    alone, _ = _explained(explained)
    return bool(((scr >= FIRST_SCRIPT) & ~alone[scr]).any())


def script_switches(points: np.ndarray, scr: np.ndarray, explained: frozenset[str],
                     cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    scr = _symbols(points, scr)
    alone, pairs = _explained(explained)
    letter = scr >= FIRST_SCRIPT
    if not (letter & ~alone[scr]).any():
        return None
    a, b = scr[:-1], scr[1:]
    glued = np.flatnonzero(letter[:-1] & letter[1:] & (a != b) & ~pairs[a, b]) + 1
    space = lookup(SPACES, points)
    index = np.arange(len(scr))
    last_solid = np.maximum.accumulate(np.where(space, -1, index))
    after_space = np.flatnonzero(letter[1:] & space[:-1]) + 1
    before = last_solid[after_space - 1]
    ok = before >= 0
    after_space, before = after_space[ok], before[ok]
    s1, s2 = scr[before], scr[after_space]
    spaced = after_space[(s1 >= FIRST_SCRIPT) & (s1 != s2) & ~pairs[s1, s2]
                         & (s1 != LATIN) & (s2 != LATIN)]
    found = np.union1d(glued, spaced)
    need, width = cfg.garbled_script_switches, cfg.garbled_script_window_chars
    if len(found) < need:
        return None
    spans = found[need - 1:] - found[:len(found) - need + 1]
    close = np.flatnonzero(spans < width)
    if not len(close):
        return None
    first = int(close[0])
    start, end = int(found[first]), int(found[first + need - 1])
    count = int(np.count_nonzero((found >= start) & (found < start + width)))
    window = scr[max(0, start - 1):start + width]
    seen = sorted({SCRIPTS[i - FIRST_SCRIPT] for i in np.unique(window).tolist()
                   if i >= FIRST_SCRIPT})
    strange = [s for s in seen if not alone[SCRIPT_ID[s]]]
    request = ", ".join(sorted(explained - {"Latin", "Han"})) or "none beyond Latin"
    return (f"{count} switches between scripts within {width} chars (threshold {need}): "
            f"{', '.join(strange)} among {', '.join(seen)}; the request's scripts: "
            f"{request}", max(0, start - 1), end + 1)
