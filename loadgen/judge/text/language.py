"""Which language a text is in, and which words a language has: the judge's lexicon.

Two maintained packages answer for us. `lingua-language-detector` identifies the
language of a text (75 languages, from character statistics; its low-accuracy mode,
about a millisecond for a reply's paragraph). `wordfreq` says how often each word of a
language is written (its 'large' word lists where there is one, else 'small'): a word it
has never seen in a language is not a word of that language, and the most frequent
words of a language are its function words (the, of, and; и, в, не). The rules of the
judge ask these two instead of keeping word lists of their own.

English is the language of most replies a load test reads, so a text whose words are
almost all English words is taken as English without asking the identifier (a set
lookup a word); only the others cost an identification.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Container, Iterable
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import regex

#: A word: letters (with their marks), an apostrophe inside allowed.
WORD = regex.compile(r"[\p{L}\p{M}]+(?:['’][\p{L}\p{M}]+)*")
#: A word counts as English without an identification when this share of a text's
#: lower-case words are among English's most frequent words.
ENGLISH_SHARE = 0.75
_ENGLISH_WORDS = 30_000
#: A word is a word of a language when wordfreq has seen it at least this often
#: (Zipf scale: 1 is once in a thousand million words).
KNOWN_ZIPF = 1.0
#: Characters of a text that are enough to identify its language.
SAMPLE_CHARS = 2000


def _caller_dir() -> Path:
    """What `locate.this_dir()` answers (the directory of the module that calls it, the
    working directory where that has no file), read from the calling frame alone."""
    caller = sys._getframe(1).f_globals.get("__file__")
    return Path(os.path.abspath(caller)).parent if caller else Path(os.path.abspath(os.getcwd()))


@cache
def import_wordfreq() -> ModuleType:
    """wordfreq, imported once, where a rule first needs it (never at import).

    Its import asks `locate.this_dir()` for its data directory, which builds
    `inspect.stack()` to read one frame: the source of every frame on the stack read
    and its module looked up, 50-80 ms of a run's start. While wordfreq imports,
    `this_dir` reads that one frame instead: the same directory. A wordfreq that no
    longer asks `locate` (or a `locate` without `this_dir`) is imported as it is."""
    try:
        import locate as finder
    except ImportError:
        finder = None  # type: ignore[assignment]
    this_dir = getattr(finder, "this_dir", None)
    if finder is None or this_dir is None or "wordfreq" in sys.modules:
        import wordfreq

        return wordfreq
    finder.this_dir = _caller_dir
    try:
        import wordfreq
    finally:
        finder.this_dir = this_dir
    return wordfreq


@cache
def _wordfreq_languages() -> frozenset[str]:
    return frozenset(import_wordfreq().available_languages())


@cache
def detector() -> Any:
    """lingua's detector over every language it knows (built once, ~0.4 s)."""
    from lingua import LanguageDetectorBuilder

    return LanguageDetectorBuilder.from_all_languages().with_low_accuracy_mode().build()


@cache
def lexicon(lang: str) -> dict[str, float]:
    """word -> frequency in `lang` (empty where wordfreq has no list)."""
    wordfreq = import_wordfreq()

    if lang not in _wordfreq_languages():
        return {}
    # "best" (the large list where there is one): the list wordfreq's own lookups read,
    # loaded once for both.
    return wordfreq.get_frequency_dict(lang, "best")


def has_lexicon(lang: str) -> bool:
    return lang in _wordfreq_languages()


@cache
def expected_function_share(lang: str) -> float:
    """The share of running text the language's function words take, by its statistics
    (0 where wordfreq has no list)."""
    wordfreq = import_wordfreq()

    return sum(wordfreq.word_frequency(w, lang) for w in function_words(lang))


@cache
def function_words(lang: str, n: int = 50) -> frozenset[str]:
    """The `n` most frequent words of a language: its function words."""
    wordfreq = import_wordfreq()

    lang = _WORDFREQ_NAMES.get(lang, lang)
    if not has_lexicon(lang):
        return frozenset()
    return frozenset(wordfreq.top_n_list(lang, n))


#: Languages wordfreq lists under another code (Tagalog as Filipino): their function
#: words alone are read from it (a Taglish answer's "ang", "ng", "sa").
_WORDFREQ_NAMES = {"tl": "fil"}


@cache
def english_common() -> frozenset[str]:
    wordfreq = import_wordfreq()

    return frozenset(wordfreq.top_n_list("en", _ENGLISH_WORDS))


def zipf(word: str, lang: str) -> float:
    """How often `word` (lower case) is written in `lang`, on the Zipf scale (0: never)."""
    freq = lexicon(lang).get(word, 0.0)
    return math.log10(freq) + 9 if freq > 0 else 0.0


def known_words(lang: str) -> Container[str]:
    """The words of a language wordfreq has seen at least KNOWN_ZIPF often: its word list
    itself (wordfreq lists no word seen less than once in 10^8 words, Zipf 1), one lookup
    a word."""
    return lexicon(lang)


def is_known(word: str, langs: Iterable[str]) -> bool:
    """`word` (lower case) is a word of one of the languages."""
    return any(word in known_words(lang) for lang in langs)


def mostly_english(words: list[str]) -> bool:
    """Lower-case words almost all among English's most frequent: English, no question."""
    if not words:
        return False
    return sum(map(english_common().__contains__, words)) >= ENGLISH_SHARE * len(words)


@lru_cache(maxsize=4096)
def confidences(text: str) -> tuple[tuple[str, float], ...]:
    """(ISO 639-1 code, confidence) of every language lingua weighs for the text, most
    confident first (empty where it cannot say: no letters)."""
    # Lone surrogates (a stream cut inside a pair) cannot cross into the detector.
    sample = text[:SAMPLE_CHARS].encode("utf-8", "replace").decode("utf-8")
    values = detector().compute_language_confidence_values(sample)
    return tuple((v.language.iso_code_639_1.name.lower(), float(v.value)) for v in values)


def identify(text: str) -> tuple[str | None, float]:
    """(ISO 639-1 code, confidence) of the text's language; None where lingua cannot say
    (no letters) or names a language without an ISO 639-1 code."""
    values = confidences(text)
    return values[0] if values else (None, 0.0)


def language_of(text: str, words: list[str] | None = None) -> str | None:
    """The language of a text: English where its words (lower case, `words` if the caller
    has them) are almost all English, else what lingua says. Words are counted, not
    letters: an English answer that names three long German compounds is English."""
    if words is None:
        words = [w.lower() for w in WORD.findall(text[:SAMPLE_CHARS])]
    if mostly_english(words[:400]):
        return "en"
    return identify(text[:SAMPLE_CHARS])[0]


#: A token of letters and digits both (`0UNJNX`, `AC-8812`'s `8812` aside, `v2`): an
#: identifier, written in no language.
_LETTERS_AND_DIGITS = regex.compile(r"\b(?=[\p{L}\p{M}]*\p{N})(?=\p{N}*[\p{L}\p{M}])"
                                    r"[\p{L}\p{M}\p{N}]+\b")


def languages_of_request(texts: Iterable[str]) -> list[str]:
    """The languages a request's texts are written in (sorted ISO codes): a reply may
    answer in any of them. Each text of some length is identified on its own (a system
    prompt in English, the user's question in Russian). Identifiers of letters and
    digits are no words of any language: a tool call's arguments
    (`{"account_id":"0UNJNX"}`) are read by their keys, and a text of codes alone says
    nothing (lingua, asked, names some language at no confidence, and its first answer
    costs a process a third of a second of loading every language's model)."""
    found = set()
    for text in texts:
        text = text[-SAMPLE_CHARS:] if len(text) > SAMPLE_CHARS else text
        text = _LETTERS_AND_DIGITS.sub(" ", text)
        letters = sum(len(w) for w in WORD.findall(text))
        if letters >= 3:
            lang = language_of(text)
            if lang:
                found.add(lang)
    return sorted(found)


@cache
def common_words(lang: str, n: int = 30_000) -> frozenset[str]:
    """A language's `n` most frequent words (English's is `english_common`)."""
    wordfreq = import_wordfreq()

    if lang == "en" and n == _ENGLISH_WORDS:
        return english_common()
    if not has_lexicon(lang):
        return frozenset()
    try:
        return frozenset(wordfreq.top_n_list(lang, n))
    except (LookupError, ImportError):
        return frozenset()


#: The longest word a split of glued letters tries.
_LONGEST_WORD = 18
#: What a letter no word covers costs, in log10 probability (a word seen once in 10^9).
_UNCOVERED = -9.0
#: A language's everyday words: its most frequent ones.
_EVERYDAY = 10_000


def split_into_words(run: str, langs: Iterable[str]) -> float:
    """How much of a run of letters with no spaces reads as the languages' everyday words
    glued together: the share of its letters that the best split (each word's
    frequency, wordfreq) gives to one of a language's 10,000 most frequent words. Words
    a detokeniser glued together read almost whole ("the", "user", "wants", "account":
    about 1.0 in English, 0.4 and more in Russian, whose word forms are many); a long
    real word (a compound, a chemical, a place name) splits into rarer pieces (0.33 at
    most in docs/testing.md's families)."""
    langs = tuple(lang for lang in langs if has_lexicon(lang))
    tables = [lexicon(lang) for lang in langs]
    everyday = [common_words(lang, _EVERYDAY) for lang in langs]
    single = tables[0].get if len(tables) == 1 else None
    low = run.casefold()
    n = len(low)
    # prefix -> (log10 probability of its best split, letters in everyday words)
    best: list[tuple[float, int]] = [(0.0, 0)] + [(-math.inf, 0)] * n
    for i in range(n):
        score, plain = best[i]
        if score == -math.inf:
            continue
        if score + _UNCOVERED > best[i + 1][0]:
            best[i + 1] = (score + _UNCOVERED, plain)
        for j in range(i + 1, min(n, i + _LONGEST_WORD) + 1):
            piece = low[i:j]
            # One language (the common case): its frequency, without a generator.
            freq = single(piece, 0.0) if single is not None else \
                max((t.get(piece, 0.0) for t in tables), default=0.0)
            if freq > 0 and score + math.log10(freq) > best[j][0]:
                known = j - i > 1 and any(piece in e for e in everyday)
                best[j] = (score + math.log10(freq), plain + (j - i if known else 0))
    return best[n][1] / max(n, 1)
