"""`wrong_language` and `unfinished`: an answer in prose that is fluent and still wrong.

- wrong_language: the visible answer is prose (a dozen words of running text or more,
  code, markup and URLs left out) in a language the request neither wrote in nor named.
  A request's languages (`params.languages`, worked out once per body when the request
  is built) are those its messages are written in (lingua, `judge.text.language`) and those
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
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import regex
from pydantic import Field

from loadgen.judge.reply.family import Family, Finding, Found
from loadgen.judge.reply.garbled.words import _UNSPACED, Words, runs, words
from loadgen.judge.text import language, language_names
from loadgen.judge.text.scripts import message_texts, script_of
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict

#: A language identified with less confidence than this is not held against a reply.
CONFIDENCE = 0.9
#: Words of running text an answer needs before its language is judged.
PROSE_WORDS = 12
#: Letters in scripts written without spaces an answer needs before its language is
#: judged (about twelve words), a Han or kana character weighed as `_SYLLABIC` letters.
UNSPACED_LETTERS = 60
_SYLLABIC = {"Han": 3, "Hiragana": 3, "Katakana": 3}
#: Kana among Han and kana: at least this, Japanese; at most this, Chinese.
_KANA_JAPANESE = 0.12
_KANA_CHINESE = 0.02
_CODE = regex.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|https?://\S+", regex.DOTALL)
#: Closing punctuation of any script, closing quotes and brackets, and markup emphasis.
_CLOSED = regex.compile(r"[\p{Terminal_Punctuation}\p{Pf}\p{Pe}\"'*_~`…]\s*$")
_GOES_ON = regex.compile(r"[,(\[{\-–—/]\s*$")
_NOT_A_SENTENCE = regex.compile(r"^\s*(?:[-*+•>|#]|\d+[.)]|[A-Za-z][.)]\s)")
_LAST_WORD = regex.compile(r"([\p{L}\p{M}']+)\W*$")
#: An English word that ends less than this share of its sentences cannot end one.
_ENDS_SELDOM = 0.01
_SENTENCE_WORDS = 5
#: A text of this many words or more, this share of them common English words, mixes
#: English with another language (Spanglish: about half).
_MIXED_WORDS = 8
_MIXED_SHARE = (0.2, 0.9)
#: A mixed request's clauses identified, at most, and what splits them.
_MIXED_CLAUSES = 16
_CLAUSE = regex.compile(r"[.,;:!?\n]+")
#: Zipf values apart an English word must be more frequent in English than in the
#: answer's language to count as English mixed in ("to", "a", "do" are Polish words).
_MORE_ENGLISH = 1.0
_ORDER_TABLE = Path(__file__).with_name("garbled") / "english_order.json"


class LanguageFinding(Finding):
    language: str = ""
    confidence: float = 0.0
    request_languages: list[str] = Field(default_factory=list)


class UnfinishedFinding(Finding):
    why: str = ""
    tail: str = ""


def named_languages(text: str) -> frozenset[str]:
    """The languages a request names ("in French", "по-французски", "用法语", "Flemish"),
    by any name any language has for them (`judge.text.language_names`)."""
    return language_names.named(text)[0]


def request_languages(messages: list[dict[str, Any]]) -> list[str]:
    """What a reply to these messages may be written in: the languages of the texts,
    and the languages they name."""
    texts = message_texts(messages)
    found = set(language.languages_of_request(texts))
    for text in texts:
        found |= named_languages(text)
    return sorted(found)


def mixed_languages(messages: list[dict[str, Any]]) -> frozenset[str]:
    """The languages a request mixes with English, English among them (empty where it
    mixes none): a mix it names (Spanglish, Hinglish: `language_names`), or one of its
    texts written as one (`_mixed_with_english`: Swiss German with English)."""
    found: set[str] = set()
    for text in message_texts(messages):
        codes, mixed = language_names.named(text)
        if mixed:
            found |= codes | {"en"}
        if other := _mixed_with_english(text[:language.SAMPLE_CHARS]):
            found |= other | {"en"}
    return frozenset(found)


def _mixed_with_english(text: str) -> frozenset[str]:
    """The languages a text mixes English with, where it does: its Latin words, at least
    `_MIXED_WORDS` and four fifths of its words, a `_MIXED_SHARE` of them common English
    words, and clauses of it (`_MIXED_CLAUSES` at most, three words and more each)
    confidently in another language. Lingua names a language it does not know
    (romanized Hindi) as some other; that only widens what the reply may be written in."""
    found = words(text)
    keys = [k for k, s in zip(found.keys, found.scripts, strict=True) if s == "Latin"]
    if len(keys) < _MIXED_WORDS or len(keys) < 0.8 * len(found):
        return frozenset()
    common = language.english_common()
    share = sum(map(common.__contains__, keys)) / len(keys)
    if not _MIXED_SHARE[0] <= share < _MIXED_SHARE[1]:
        return frozenset()
    clauses = [c for c in _CLAUSE.split(text) if len(c.split()) >= 3][:_MIXED_CLAUSES]
    out = set()
    for clause in clauses:
        lang, confidence = language.identify(clause)
        if lang not in (None, "en") and confidence >= CONFIDENCE:
            out.add(lang)
    return frozenset(out)


def _prose(text: str) -> str:
    return _CODE.sub(" ", text)


def _unspaced_bulk(found: Words) -> bool:
    """The answer is mostly written in scripts without spaces between words (Chinese,
    Japanese, Thai): at least `UNSPACED_LETTERS` of their letters, weighed as letters of
    an alphabet (a Han or kana character stands for about three), and as many as all its
    other letters. An English answer that quotes a Chinese phrase is not one."""
    unspaced = other = 0
    for key, script in zip(found.keys, found.scripts, strict=True):
        if script in _UNSPACED:
            unspaced += len(key) * _SYLLABIC.get(script, 1)
        else:
            other += len(key)
    return unspaced >= UNSPACED_LETTERS and unspaced >= other


def _kana_share(text: str) -> float:
    """Kana among a text's Han and kana characters: Japanese prose writes its particles
    and endings in kana (a third of its characters and more), Chinese none."""
    cjk = kana = 0
    for script in map(script_of, text):
        if script in ("Hiragana", "Katakana"):
            kana += 1
        elif script == "Han":
            cjk += 1
    return kana / max(1, kana + cjk)


def _identified(prose: str, found: Words) -> tuple[str | None, float]:
    """The answer's language and the confidence that it is that language or one the
    judge holds the same (`language_names.equivalents`: Bokmål or Nynorsk). Chinese and
    Japanese are told by their kana, which lingua weighs less than its n-grams."""
    if language.mostly_english(found.keys[:400]):
        return "en", 1.0
    values = language.confidences(prose)
    if not values:
        return None, 0.0
    lang = values[0][0]
    if lang in ("zh", "ja"):
        share = _kana_share(prose[:language.SAMPLE_CHARS])
        if share >= _KANA_JAPANESE:
            lang = "ja"
        elif share <= _KANA_CHINESE:
            lang = "zh"
        else:
            return None, 0.0  # a Han-heavy Japanese or a Chinese text quoting Japanese
    same = language_names.equivalents(lang)
    return lang, sum(v for code, v in values if code in same)


def _mixes_in_english(found: Words, lang: str) -> bool:
    """The answer is written in Latin letters and mixes English in: a `_MIXED_SHARE` of
    its words English words far more frequent in English than in its own language
    (Spanglish, Hinglish, Taglish; a Polish answer's "to", "a" and "do" are Polish).
    A Chinese or Russian answer that quotes English commands is no mix."""
    latin = sum(len(k) for k, s in zip(found.keys, found.scripts, strict=True)
                if s == "Latin")
    if not found or latin < 0.8 * sum(map(len, found.keys)):
        return False
    # The answer's language's word statistics, or those of one held the same (Bokmål's
    # for Nynorsk); without any, its words cannot be told from English ones.
    own = next((other for other in sorted(language_names.equivalents(lang))
                if language.has_lexicon(other)), None) if lang != "en" else "en"
    if own is None:
        return False
    common = language.english_common()
    english = sum(1 for k, s in zip(found.keys, found.scripts, strict=True)
                  if s == "Latin" and k in common
                  and (own == "en" or language.zipf(k, "en") >= language.zipf(k, own)
                       + _MORE_ENGLISH))
    return english >= _MIXED_SHARE[0] * len(found)


def find_wrong_language(record: RequestRecord) -> LanguageFinding | None:
    """The answer's language, where it is confidently one the request never used, named
    or held the same as one of those (`language_names.equivalents`). Prose in spaced
    scripts needs a run of `PROSE_WORDS` words; an answer in scripts written without
    spaces, its bulk in them (`_unspaced_bulk`). An answer that mixes English with
    another language is no other language where the request invites the mix."""
    allowed = record.params.get("languages")
    if not isinstance(allowed, list) or not allowed or record.finish_reason != "stop":
        return None
    prose = _prose(record.content)
    found = words(prose)
    spaced = any(True for _ in runs(found, PROSE_WORDS))
    if not spaced and not _unspaced_bulk(found):
        return None
    lang, confidence = _identified(prose, found)
    same = language_names.expand(allowed)
    # A spaced script's language without word statistics (Latin: lorem ipsum) is not
    # judged; the scripts without spaces are each one language's (Thai) or told by kana.
    if lang is None or confidence < CONFIDENCE or lang in same \
            or (spaced and not any(map(language.has_lexicon,
                                       language_names.equivalents(lang)))):
        return None  # Latin (lorem ipsum) and the like: no statistics to be sure by
    if record.params.get("mixes_english") and "en" in same \
            and _mixes_in_english(found, lang):
        return None  # Spanglish asked for, or written to: English mixed in, as invited
    return LanguageFinding(language=lang, confidence=round(confidence, 3),
                           request_languages=sorted(c for c in allowed if isinstance(c, str)))


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


def find_unfinished(record: RequestRecord) -> UnfinishedFinding | None:
    """Why an answer that finished with `stop` stops mid-sentence, or None."""
    if record.finish_reason != "stop" or record.tool_calls:
        return None
    content = record.content.rstrip()
    if not content:
        return None
    if content.count("```") % 2:
        return UnfinishedFinding(why="a code block that never closes", tail=content[-80:])
    line = content.rsplit("\n", 1)[-1]
    if _NOT_A_SENTENCE.match(line) or _CLOSED.search(line) or "|" in line:
        return None
    prose = _prose(line)
    found = words(prose)
    if len(found) < _SENTENCE_WORDS or not found.gaps[-1]:
        return None
    tail = line[-80:]
    if _GOES_ON.search(line):
        return UnfinishedFinding(why=f"it ends on {line.rstrip()[-1]!r}, as a sentence goes on",
                                 tail=tail)
    if found.ends[-1] != len(prose.rstrip()) or found.names[-1]:
        return None  # a name, a number or code ends it: no word to judge
    last = found.keys[-1]
    if language.language_of(content, found.keys) != "en":
        return None
    share = _end_shares().get(last)
    if share is not None and share < _ENDS_SELDOM:
        return UnfinishedFinding(
            why=f"its last word {last!r} ends {share:.1%} of English sentences", tail=tail)
    if len(last) >= 3 and not language.is_known(last, ("en",)) \
            and all(language.is_known(k, ("en",)) for k in found.keys[-_SENTENCE_WORDS:-1]):
        return UnfinishedFinding(
            why=f"its last word {last!r} is no English word: cut inside a word", tail=tail)
    return None



def _check(record: RequestRecord, cfg: object) -> Found | None:
    verdicts: set[Verdict] = set()
    findings: dict[str, Any] = {}
    other = find_wrong_language(record)
    if other is not None:
        verdicts.add(Verdict.WRONG_LANGUAGE)
        findings["wrong_language"] = other.model_dump(mode="json")
    cut = find_unfinished(record)
    if cut is not None:
        verdicts.add(Verdict.UNFINISHED)
        findings["unfinished"] = cut.model_dump(mode="json")
    return Found(frozenset(verdicts), findings) if verdicts else None


def _describe(found: Mapping[str, Any]) -> list[str]:
    lines = []
    if (other := found["wrong_language"]) is not None:
        lines.append(f"wrong language: the answer is {other.language} "
                     f"(confidence {other.confidence:.2f}); the request's: "
                     f"{', '.join(other.request_languages)}")
    if (cut := found["unfinished"]) is not None:
        lines.append(f"unfinished: {cut.why}; it ends {cut.tail[-40:]!r}")
    return lines


FAMILY = Family(
    name="reply_language", verdicts=frozenset({Verdict.WRONG_LANGUAGE, Verdict.UNFINISHED}),
    findings={"wrong_language": LanguageFinding | None, "unfinished": UnfinishedFinding | None},
    describe=_describe, check=_check)
