"""`wrong_language` and `unfinished`: an answer in prose that is fluent and still wrong.

- wrong_language: the visible answer is prose (a dozen words of running text or more,
  code, markup and URLs left out) in a language the request neither wrote in nor named.
  A request's languages (`params.languages`, worked out once per body when the request
  is built) are those its messages are written in (lingua, `judge.language`) and those
  it names, in English, in their own name or in the request's own language (`langcodes`
  with its CLDR names: "reply in French", "用法语回答", "ответь по-французски"). A model
  that answers an English question in fluent French read something that was not this
  request. Only a confident identification counts (lingua's confidence of at least 0.9,
  and for Latin script not a text whose words are almost all English), of a language
  the judge has word statistics for (placeholder Latin, lorem ipsum, is not judged).
- unfinished: an answer in prose that finished with `stop` in the middle of a sentence:
  its last line is prose and has no closing punctuation, and either its last mark is
  one a sentence goes on after (a comma, a dash, an opening bracket), or, in English,
  its last word is one sentences almost never end with (the, of, and, to, is: less than
  1% of the times English writes it, by the counts of `english_order.json`) or is cut
  (no English word, where the words before it are). A name, a number or code at the
  end, and other languages' words (their inflections outrun any word list), are not
  judged.
  A list, a table, code, a heading or a closing like "Thanks" is no sentence to finish.
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import regex

from loadgen.judge import language
from loadgen.judge.garbled.words import runs, words
from loadgen.judge.scripts import message_texts
from loadgen.records import RequestRecord

#: A language identified with less confidence than this is not held against a reply.
CONFIDENCE = 0.9
#: Words of running text an answer needs before its language is judged.
PROSE_WORDS = 12
_CODE = regex.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|https?://\S+", regex.DOTALL)
#: Closing punctuation of any script, closing quotes and brackets, and markup emphasis.
_CLOSED = regex.compile(r"[\p{Terminal_Punctuation}\p{Pf}\p{Pe}\"'*_~`…]\s*$")
_GOES_ON = regex.compile(r"[,(\[{\-–—/]\s*$")
_NOT_A_SENTENCE = regex.compile(r"^\s*(?:[-*+•>|#]|\d+[.)]|[A-Za-z][.)]\s)")
_LAST_WORD = regex.compile(r"([\p{L}\p{M}']+)\W*$")
#: An English word that ends less than this share of its sentences cannot end one.
_ENDS_SELDOM = 0.01
_SENTENCE_WORDS = 5
_ORDER_TABLE = Path(__file__).with_name("garbled") / "english_order.json"


@cache
def _names() -> list[tuple[str, str]]:
    """(ISO code, name) of every language the judge knows, by every name a request may
    use: English, its own, and each other language's name for it (CLDR)."""
    import langcodes

    codes = sorted({lang.iso_code_639_1.name.lower() for lang in _lingua_languages()})
    out = set()
    for code in codes:
        entry = langcodes.Language.get(code)
        for name in {entry.display_name(), entry.autonym(),
                     *(entry.display_name(other) for other in ("zh", "ja", "ko", "ru", "ar",
                                                               "fr", "de", "es"))}:
            if name and name.lower() != code:
                out.add((code, name.casefold()))
    return sorted(out)


def _lingua_languages() -> list[Any]:
    from lingua import Language

    return list(Language.all())


@cache
def _stems() -> dict[str, set[str]]:
    """Each language name's stem (inflected endings allowed: all but its last two
    letters, four at least; a name of several words whole) -> the languages it names."""
    out: dict[str, set[str]] = {}
    for code, name in _names():
        stem = name[:max(4, len(name) - 2)] if " " not in name else name
        out.setdefault(stem, set()).add(code)
    return out


@cache
def _name_pattern() -> regex.Pattern[str]:
    """One pass over a request for every language name."""
    alternatives = "|".join(regex.escape(s) for s in sorted(_stems(), key=len, reverse=True))
    # A Latin, Cyrillic or Greek name begins a word; a name in Han or kana may sit
    # anywhere (no spaces around words there).
    return regex.compile(rf"(?<![\p{{Latin}}\p{{Cyrillic}}\p{{Greek}}])(?:{alternatives})",
                         regex.IGNORECASE)


@lru_cache(maxsize=512)
def named_languages(text: str) -> frozenset[str]:
    """The languages a request names ("in French", "по-французски", "用法语"). Kept per
    text: a session's every turn resends its long shared system prompt and history."""
    stems = _stems()
    return frozenset(code for m in _name_pattern().finditer(text)
                     for code in stems.get(m.group().casefold(), ()))


def request_languages(messages: list[dict[str, Any]]) -> list[str]:
    """What a reply to these messages may be written in: the languages of the texts,
    and the languages they name."""
    texts = message_texts(messages)
    found = set(language.languages_of_request(texts))
    for text in texts:
        found |= named_languages(text)
    return sorted(found)


def _prose(text: str) -> str:
    return _CODE.sub(" ", text)


def find_wrong_language(record: RequestRecord) -> dict[str, Any] | None:
    """The answer's language, where it is confidently one the request never used."""
    allowed = record.params.get("languages")
    if not isinstance(allowed, list) or not allowed or record.finish_reason != "stop":
        return None
    prose = _prose(record.content)
    found = words(prose)
    if not any(True for _ in runs(found, PROSE_WORDS)):
        return None
    lang: str | None = "en"
    confidence = 1.0
    if not language.mostly_english(found.keys[:400]):
        lang, confidence = language.identify(prose)
    if lang is None or confidence < CONFIDENCE or lang in allowed \
            or not language.has_lexicon(lang):
        return None  # Latin (lorem ipsum) and the like: no statistics to be sure by
    return {"language": lang, "confidence": round(confidence, 3),
            "request_languages": sorted(allowed)}


@cache
def _end_shares() -> dict[str, float]:
    """word -> the share of its occurrences that end a sentence (English, from the same
    counts the word-order rule reads)."""
    table = json.loads(_ORDER_TABLE.read_text())
    ends: dict[str, int] = {}
    for a, b, count in table["bigrams"]:
        if b == "<s>":
            ends[a] = count
    return {w: ends.get(w, 0) / n for w, n in table["unigrams"].items()
            if n >= 100 and not w.startswith("<")}


def find_unfinished(record: RequestRecord) -> dict[str, Any] | None:
    """Why an answer that finished with `stop` stops mid-sentence, or None."""
    if record.finish_reason != "stop" or record.tool_calls:
        return None
    content = record.content.rstrip()
    if not content:
        return None
    if content.count("```") % 2:
        return {"why": "a code block that never closes", "tail": content[-80:]}
    line = content.rsplit("\n", 1)[-1]
    if _NOT_A_SENTENCE.match(line) or _CLOSED.search(line) or "|" in line:
        return None
    prose = _prose(line)
    found = words(prose)
    if len(found) < _SENTENCE_WORDS or not found.gaps[-1]:
        return None
    tail = line[-80:]
    if _GOES_ON.search(line):
        return {"why": f"it ends on {line.rstrip()[-1]!r}, as a sentence goes on",
                "tail": tail}
    if found.ends[-1] != len(prose.rstrip()) or found.names[-1]:
        return None  # a name, a number or code ends it: no word to judge
    last = found.keys[-1]
    if language.language_of(content, found.keys) != "en":
        return None
    share = _end_shares().get(last)
    if share is not None and share < _ENDS_SELDOM:
        return {"why": f"its last word {last!r} ends {share:.1%} of English sentences",
                "tail": tail}
    if len(last) >= 3 and not language.is_known(last, ("en",)) \
            and all(language.is_known(k, ("en",)) for k in found.keys[-_SENTENCE_WORDS:-1]):
        return {"why": f"its last word {last!r} is no English word: cut inside a word",
                "tail": tail}
    return None

