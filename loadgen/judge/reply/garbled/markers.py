"""The `markers` detector: bursts of special tokens, tokenizer markers, byte pieces,
replacement characters, mojibake and stray control characters."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.garbled.points import lookup
from loadgen.judge.reply.leaks import code_spans, talked_about

# UTF-8 read as Latin-1 or cp1252: a lead byte's character, then one continuation byte's
# (two-byte Latin: "é" -> "Ã©"), two (three-byte CJK) or three (four-byte emoji).
_CONTINUATION = ("[\u0080-\u00bf\u20ac\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030"
                 "\u0160\u2039\u0152\u017d\u2018\u2019\u201c\u201d\u2022\u2013\u2014"
                 "\u02dc\u2122\u0161\u203a\u0153\u017e\u0178]")
_MOJIBAKE = (f"[\u00c2-\u00c5]{_CONTINUATION}|[\u00e0-\u00ef]{_CONTINUATION}{{2}}"
             f"|[\u00f0-\u00f4]{_CONTINUATION}{{3}}")
_MARKER = re.compile(
    r"(?P<special><｜[^｜\n]{1,48}｜>?|<\|[A-Za-z0-9_▁:.\-]{1,48}\|>)"
    r"|(?P<piece>(?<=\w)[▁ĠĊ]|[▁ĠĊĉ](?=[▁ĠĊĉ])|<0x[0-9A-Fa-f]{2}>)"
    r"|(?P<replacement>\ufffd)"
    f"|(?P<mojibake>{_MOJIBAKE})"
    r"|(?P<control>[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]|\x1b(?!\[))")
# Characters a marker starts with (or is), for a screen that runs on every reply.
_SCREEN = np.zeros(0x10000, dtype=bool)
_SCREEN[[*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0),
         *range(0xC2, 0xF5), *map(ord, "▁ĠĊĉ\ufffd｜")]] = True
_SCREEN[-1] = False  # where code points past the table land


#: How near a mojibake sequence the character it garbles must stand to explain it.
_EXPLAINED_WITHIN = 80


def _shown_beside(text: str, m: re.Match[str]) -> bool:
    """Mojibake an answer explains: the character it garbles ("é" read as "Ã©") stands
    close by, as an example does."""
    for codec in ("cp1252", "latin-1"):
        try:
            meant = m.group().encode(codec).decode("utf-8")
        except UnicodeError:
            continue
        near = text[max(0, m.start() - _EXPLAINED_WITHIN):m.end() + _EXPLAINED_WITHIN]
        return meant in near
    return False


def _may_have_markers(text: str, points: np.ndarray) -> bool:
    """Cheap screen before the marker regex: most replies have none of its characters."""
    if "<|" in text or "<0x" in text or "\x1b" in text:
        return True
    return bool(lookup(_SCREEN, points).any())


def markers(text: str, points: np.ndarray, cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    if not _may_have_markers(text, points):
        return None
    need, width = cfg.garbled_marker_burst, cfg.garbled_marker_window_chars
    hits: list[tuple[int, str]] = []
    code: list[tuple[int, int]] | None = None  # the text's code spans, once, if needed
    lo = 0
    # In text order, a window ending at each marker; the first burst ends the search, so
    # a reply of nothing but markers costs no more than its first few.
    for m in _MARKER.finditer(text):
        if m.lastgroup == "special":
            # Special tokens an answer talks about (a chat template explained) are not
            # a burst.
            code = code_spans(text) if code is None else code
            if talked_about(text, m.start(), m.end(), code):
                continue
        if m.lastgroup == "mojibake" and _shown_beside(text, m):
            continue
        hits.append((m.start(), m.group() if m.lastgroup == "special" else str(m.lastgroup)))
        hi = len(hits) - 1
        while hits[hi][0] - hits[lo][0] >= width:
            lo += 1
        if hi - lo + 1 >= need:
            keys = Counter(key for _, key in hits[lo:hi + 1])
            if keys.most_common(1)[0][1] >= 2:
                seen = ", ".join(f"{k} x{n}" for k, n in keys.most_common(4))
                return (f"{hi - lo + 1} markers within {width} chars (threshold {need}): "
                        f"{seen}", hits[lo][0], hits[hi][0] + 1)
    return None
