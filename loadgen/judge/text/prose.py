"""Prose or structured data: the loop rules hold repeated sentences to a stricter count
than repeated records (a grid, a table, JSON, markup) in a reply that finished."""

from __future__ import annotations

import re

_WORD = r"[^\W\d_]{2,}"
_SPACE = r"[,;]?[ \t\u00a0]+"
# Prose: three words in a row, or four characters of a script written without spaces.
_PROSE = re.compile(rf"{_WORD}{_SPACE}{_WORD}{_SPACE}{_WORD}"
                    r"|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{4}")
# A record of structured data: a JSON or dict key, a table row, an XML element; or two
# YAML keys.
_RECORD = re.compile(r"""["'][^"'\n]{0,80}["']\s*:|\|[^|\n]*\|[^|\n]*\|"""
                     r"|<([A-Za-z][\w.-]*)\b[^<>]*>[^<]*</\1\s*>")
_YAML_KEY = re.compile(r"(?:^|\s)[a-z_][a-z0-9_]*:\s")


def is_prose(unit: str) -> bool:
    """Sentences rather than structured data (cells, numbers, records, markup)."""
    return _PROSE.search(unit) is not None and _RECORD.search(unit) is None \
        and len(_YAML_KEY.findall(unit)) < 2


_LETTERS = re.compile(_WORD)


def is_sentence(segment: str) -> bool:
    """A sentence, however short its runs of words ("Try x = 7: that gives 23, not
    40."): three words of letters, and no record of structured data."""
    return _RECORD.search(segment) is None and len(_YAML_KEY.findall(segment)) < 2 \
        and len(_LETTERS.findall(segment)) >= 3
