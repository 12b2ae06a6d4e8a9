"""What a request carries that no other request does: its codes, and its words.

A workload that knows its answers gives each request facts of its own, written as
*codes*: 6 to 12 upper-case letters and digits with at least one of each (`XEHM4B`,
`NW481302`). The load generator's judge finds them in replies with the same pattern
(copied here: the server side never imports the load generator), so a code of another
request in a reply is evidence that the reply read that request's context.

The toy model states its own codes (`model.py`); a reply whose rows read another
request's KV may state that request's codes instead, or write salad made of its words
(`faces.py`, `salad.py`). Only the user's messages count: the tool descriptions and the
system prompt are the same for every request (they mention `XEHM4B` as an example).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_CODE_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])[A-Z0-9]{6,12}(?![A-Za-z0-9])")
_WORD = re.compile(r"\b[A-Za-z]{4,}\b")
#: Words kept per request for salad: enough to vary, bounded for memory.
WORDS_KEPT = 24


def is_code(text: str) -> bool:
    """6-12 upper-case letters and digits, at least one of each."""
    return (6 <= len(text) <= 12 and text.isascii() and text.isalnum() and text.isupper()
            and any(c.isdigit() for c in text) and any(c.isalpha() for c in text))


def code_matches(text: str) -> Iterator[re.Match[str]]:
    """Where the codes of a text are (whole tokens only: `XEHM4B`, not `XEHM4BX`)."""
    return (m for m in _CODE_CANDIDATE.finditer(text or "") if is_code(m.group(0)))


def find_codes(text: str) -> list[str]:
    """The codes of a text in order of first appearance, each once."""
    return list(dict.fromkeys(m.group(0) for m in code_matches(text)))


def replace_codes(text: str, swap: dict[str, str]) -> str:
    """`text` with every whole-token code in `swap` replaced by its value."""
    if not swap:
        return text
    return _CODE_CANDIDATE.sub(lambda m: swap.get(m.group(0), m.group(0)), text)


def message_text(message: dict[str, Any]) -> str:
    """A message's text, plain or as OpenAI content parts."""
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [message_text(m) for m in messages if m.get("role") == "user"]


@dataclass(frozen=True)
class Carried:
    """A request's own facts (its codes, in order: the account first) and some of its
    words (what salad made of its KV is spelled with)."""

    facts: tuple[str, ...] = ()
    words: tuple[str, ...] = ()


def carried_by(messages: list[dict[str, Any]]) -> Carried:
    """What the user's messages of a chat carry."""
    text = "\n".join(user_texts(messages))
    words = dict.fromkeys(w.lower() for w in _WORD.findall(text))
    return Carried(tuple(find_codes(text)), tuple(list(words)[:WORDS_KEPT]))
