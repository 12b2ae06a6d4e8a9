"""Code points as numpy arrays, looked up in per-character tables: how every
detector of `garbled` reads a text at C speed."""

from __future__ import annotations

import numpy as np

from loadgen.judge.text.scripts import (
    FIRST_SCRIPT,
    SCRIPTS,
)


def lookup(table: np.ndarray, points: np.ndarray) -> np.ndarray:
    """table[point] per character; code points past the table read its last entry."""
    if points.dtype == np.uint8 and len(table) >= 0x100:
        return table[points]
    return table[np.minimum(points, len(table) - 1)]


#: Entries of a per-script table: every script id `scripts` hands out.
TABLE_SIZE = FIRST_SCRIPT + len(SCRIPTS)
#: Characters that separate words as spaces do (the last entry: any code point past U+3000).
SPACES = np.zeros(0x3002, dtype=bool)  # the last entry: any code point past U+3000
SPACES[[0x09, 0x20, 0xA0, 0x3000]] = True
