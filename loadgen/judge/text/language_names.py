"""Which languages a request names, by any name any language has for them.

The names are the language library's (`language_data`, which `langcodes.Language.find`
reads): every name of every language in every language CLDR and its extra lists know,
aliases included (Flemish, Valencian, Moldovan, Bokmål, Farsi, Castilian, 粤语,
"по-французски" from французский). A named tag is resolved to a language the identifier
knows (`judged_language`): its own code, its macrolanguage's (Cantonese and Mandarin are
Chinese), or the closest by CLDR's language distance (Norwegian is Bokmål, Swiss German
is German); languages of one macrolanguage, or a distance apart that CLDR counts as one
language, are one language to the judge (`equivalents`): Bokmål and Nynorsk, Croatian,
Bosnian and Serbian. Names CLDR lacks in everyday use ("castellano", 汉语,
"moldovenească") are added (`EXTRA_NAMES`); a blend of a name with English's
("Spanglish", "Hinglish", "Franglais": `BLENDS`, listed) names both and a mix; a name of
a dialect the judge reads as a standard language (Swiss German) is told apart
(`names_dialect`): its words are not in the standard language's word lists.

A request is read once, in one pass: at each word's start (anywhere, in scripts written
without spaces between words and in scripts whose words take clitics before them) the
names that begin there are looked up in a trie, so the cost is linear in the request.
A name in a cased alphabet may end in an inflection (four letters at most), but a word
that is an everyday English word and no language name ("check", which begins like
Spanish's "checo") names nothing, nor does a whole word that is another language's name
("galego", Galician, is no inflection of Spanish's "galés" for Welsh).

The name table is built on the first request read (about 0.3 s: the library's 64,000
names, of which those of languages the judge knows are kept, and CLDR's display names);
nothing is built at import. It is kept in the project's cache (`DSV4_QUAL_CACHE`, else
~/.cache/dsv4-qual) under a key of everything it is built from: this module's source,
the versions of the libraries it reads and Python's (whose Unicode tables fold the
names' case). A later process reads it back (about 20 ms); one whose key differs, or
that cannot read or write the cache, builds the table as before.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import sys
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import regex

from loadgen.files import write_atomic

#: Letters an inflected name may carry past its stem ("русск|ом", "Englis|chen").
_TAIL = 4
#: The longest name looked up, in characters.
_LONGEST = 40
#: CLDR's language distance at or below which two languages are one to the judge
#: (macrolanguage members and standard variants: no/nb 1, nl-BE/nl 4, gsw/de 8, hr/bs 8).
_SAME = 10
#: CLDR's language distance from which a language the judge reads as a near one is a
#: dialect of it (gsw/de 8), not one of its standard forms (no/nb 1, nl-BE/nl 4).
_DIALECT = 5
_CASED = ("Latin", "Cyrillic", "Greek")
_CASED_LETTER = regex.compile(r"[\p{Latin}\p{Cyrillic}\p{Greek}]")


@cache
def judged_codes() -> frozenset[str]:
    """ISO 639-1 codes of the languages the identifier (lingua) knows."""
    from lingua import Language

    return frozenset(lang.iso_code_639_1.name.lower() for lang in Language.all())


@cache
def _near() -> dict[str, str]:
    """Language -> the identifier's language CLDR puts within `_SAME` of it (gsw: de)."""
    from langcodes.data_dicts import LANGUAGE_DISTANCES

    codes = judged_codes()
    best: dict[str, tuple[int, str]] = {}
    for desired, row in LANGUAGE_DISTANCES.items():
        for supported, distance in row.items():
            if distance > _SAME or "*" in desired + supported:
                continue
            for other, known in ((desired, supported), (supported, desired)):
                if known in codes and other not in codes:
                    best[other] = min(best.get(other, (distance, known)), (distance, known))
    return {lang: known for lang, (_, known) in best.items()}


@cache
def _renamed() -> dict[str, str]:
    """Replacement code -> the identifier's code it replaced (fil -> tl)."""
    from langcodes.data_dicts import LANGUAGE_REPLACEMENTS

    return {LANGUAGE_REPLACEMENTS[c].split("-")[0]: c for c in judged_codes()
            if c in LANGUAGE_REPLACEMENTS}


@cache
def dialect(tag: str) -> bool:
    """A tag the judge reads as a standard language it is only near to (Swiss German as
    German): its words and function words are not the standard language's."""
    from langcodes import tag_distance
    from langcodes.data_dicts import MACROLANGUAGES

    lang = tag.split("-")[0].lower()
    code = judged_language(tag)
    return code is not None and lang not in judged_codes() and _near().get(lang) == code \
        and lang not in MACROLANGUAGES and tag_distance(lang, code) >= _DIALECT


@cache
def judged_language(tag: str) -> str | None:
    """The identifier's language for a language tag: its own (deprecated codes replaced:
    mo is ro), its macrolanguage's, or the one within `_SAME` (None for a language the
    judge cannot tell). Read from langcodes' tables, the tag's language subtag alone."""
    from langcodes.data_dicts import LANGUAGE_REPLACEMENTS, MACROLANGUAGES

    codes = judged_codes()
    given = tag.split("-")[0].lower()
    lang = LANGUAGE_REPLACEMENTS.get(given, given).split("-")[0]
    for candidate in (given, lang, _renamed().get(lang), MACROLANGUAGES.get(lang),
                      _near().get(lang),
                      _near().get(MACROLANGUAGES.get(lang, ""))):
        if candidate in codes:
            return candidate
    return None


@cache
def _romanized(tag: str) -> bool:
    """A tag that writes its language in a script not its own (hi-Latn: Hinglish)."""
    from langcodes.data_dicts import DEFAULT_SCRIPTS

    parts = tag.split("-")
    scripts = [p for p in parts[1:] if len(p) == 4 and p.isalpha()]
    return bool(scripts) and scripts[0].title() != DEFAULT_SCRIPTS.get(parts[0], "Latn")


@cache
def equivalents(code: str) -> frozenset[str]:
    """The languages the judge holds one with `code`: one macrolanguage, or within
    `_SAME` of each other either way."""
    from langcodes import tag_distance
    from langcodes.data_dicts import MACROLANGUAGES

    macro = MACROLANGUAGES.get(code, code)
    return frozenset(other for other in judged_codes()
                     if other == code or MACROLANGUAGES.get(other, other) == macro
                     or min(tag_distance(code, other), tag_distance(other, code)) <= _SAME)


def expand(codes: Any) -> frozenset[str]:
    """Every language equivalent to one of `codes`."""
    out: set[str] = set()
    for code in codes:
        if isinstance(code, str):
            out |= equivalents(code) if code in judged_codes() else {code}
    return frozenset(out)


def _script(name: str) -> str:
    from loadgen.judge.text.scripts import script_of

    return script_of(name)


#: Names CLDR and the library's extra lists lack, in everyday use for a language the
#: judge knows: endonyms and regional names (Spain's own "castellano", Chinese's names
#: by its speakers, "moldovenească"). Each is written as the name trie spells names.
EXTRA_NAMES: dict[str, tuple[str, ...]] = {
    "es": ("castellano", "castellana", "castellà", "castelhano", "castillan",
           "kastilisch", "кастильский", "卡斯蒂利亚语"),
    "ca": ("valencià", "valenciano", "valencien"),
    "ro": ("moldovenească", "moldoveneasca", "limba moldovenească"),
    "zh": ("汉语", "漢語", "华语", "華語", "国语", "國語", "广东话", "廣東話", "国文",
           "中国话", "中國話", "唐话"),
    "de": ("hochdeutsch", "schwyzerdütsch", "schwiizerdütsch"),
    "yo": ("yorùbá", "yoruba"),
    "ms": ("melayu",),
}
_DIGIT = re.compile(r"\d")


@cache
def _all_names() -> Any:
    """The language library's trie of every language's names in every language (tags as
    values): what a whole word names, judged or not ("galego" is Galician, not a form
    of Spanish's "galés" for Welsh)."""
    from language_data.names import load_trie
    from language_data.util import data_filename

    return load_trie(data_filename("trie/und/name_to_language.marisa"))


Table = tuple[Any, dict[str, tuple[frozenset[str], bool, bool, bool]], frozenset[str]]


@cache
def _table() -> Table:
    """(trie of keys, key -> (languages, a cased stem, romanized, a dialect's name),
    full names): every name of a language the judge knows (`_build_table`), read from
    the cache where an earlier process kept it, else built and kept there."""
    path = _cache_file()
    kept = _read_table(path) if path is not None else None
    if kept is not None:
        return kept
    built = _build_table()
    if path is not None:
        _write_table(path, built)
    return built


#: Bumped when what the cache file holds changes shape.
_CACHE_FORMAT = 1
#: The distributions the table is built from: the names (language_data), the tags'
#: replacements, macrolanguages and distances (langcodes), the languages the identifier
#: knows (lingua), the cased-letter class (regex) and the trie the file holds (marisa).
_BUILT_FROM = ("language_data", "langcodes", "lingua-language-detector", "regex",
               "marisa-trie")


def _cache_file() -> Path | None:
    """Where the table built by this source, these libraries and this Python is kept
    (None where that cannot be said: no home directory, a library's version unknown)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        root = Path(os.environ.get("DSV4_QUAL_CACHE") or Path.home() / ".cache" / "dsv4-qual")
        key = hashlib.sha256(Path(__file__).read_bytes())
        for part in (str(_CACHE_FORMAT), sys.version,
                     *(f"{dist} {version(dist)}" for dist in _BUILT_FROM)):
            key.update(b"\0" + part.encode())
    except (OSError, RuntimeError, KeyError, PackageNotFoundError):
        return None
    return root / "language-names" / f"{key.hexdigest()[:40]}.json"


def _read_table(path: Path) -> Table | None:
    """The table kept at `path`; None where there is none or it does not read whole."""
    import marisa_trie

    try:
        doc = json.loads(path.read_bytes())
        if doc.get("format") != _CACHE_FORMAT:
            return None
        sets = [frozenset(codes) for codes in doc["sets"]]
        keys, entries = doc["keys"], doc["entries"]
        if len(keys) != len(entries):
            return None
        table = {key: (sets[i], bool(cased), bool(romanized), bool(spoken))
                 for key, (i, cased, romanized, spoken) in zip(keys, entries, strict=True)}
        trie = marisa_trie.Trie().frombytes(base64.b64decode(doc["trie"]))
        if len(trie) != len(table):
            return None
        return trie, table, frozenset(doc["full"])
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def _write_table(path: Path, built: Table) -> None:
    """Keep the table at `path`, replaced whole (a process reading it meanwhile sees the
    old file or none); a cache that cannot be written is left alone."""
    trie, table, full = built
    sets: dict[frozenset[str], int] = {}
    entries = [[sets.setdefault(codes, len(sets)), cased, romanized, spoken]
               for codes, cased, romanized, spoken in table.values()]
    doc = {"format": _CACHE_FORMAT, "sets": [sorted(codes) for codes in sets],
           "keys": list(table), "entries": entries, "full": sorted(full),
           "trie": base64.b64encode(trie.tobytes()).decode("ascii")}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(doc, ensure_ascii=False,
                                      separators=(",", ":")).encode("utf-8"))


def _build_table() -> Table:
    """The table from the libraries: every name of a language the judge knows, from the
    language library's name trie, CLDR's display names and `EXTRA_NAMES` (about 0.3 s);
    only names of the languages the judge knows are kept."""
    import marisa_trie
    from language_data.names import code_to_names, normalize_name

    # The trie keeps a name's shortest unique form ("hind"); CLDR's display names whole.
    by_tag: dict[str, list[str]] = {}
    for name, raw in _all_names().items():
        by_tag.setdefault(raw.decode("utf-8"), []).append(name)
    for own in sorted(judged_codes()):
        by_tag.setdefault(own, []).extend(normalize_name(name)
                                          for name in code_to_names(own).values())
    for own, extra in EXTRA_NAMES.items():
        by_tag.setdefault(own, []).extend(extra)
    keys: dict[str, tuple[set[str], bool, bool, bool]] = {}
    full: set[str] = set()
    for tag, group in by_tag.items():
        code = judged_language(tag)
        if code is None:
            continue
        romanized, spoken = _romanized(tag), dialect(tag)
        for name in group:
            cased = name[:1].isascii() or _CASED_LETTER.match(name) is not None
            if (cased and len(name) < 4) or len(name) < 2 or _DIGIT.search(name):
                continue
            full.add(name)
            key = name[:max(4, len(name) - 2)] if cased and " " not in name else name
            entry = keys.get(key)
            if entry is None:
                keys[key] = ({code}, cased, romanized, spoken)
            else:  # romanized, a dialect, only where every name the key stands for is
                entry[0].add(code)
                keys[key] = (entry[0], entry[1], entry[2] and romanized, entry[3] and spoken)
    trie = marisa_trie.Trie(list(keys))
    table = {k: (frozenset(v[0]), v[1], v[2], v[3]) for k, v in keys.items()}
    return trie, table, frozenset(full)


def _normal(text: str) -> str:
    """As the name trie spells names: case-folded, hyphens and apostrophes plain, one
    character for one (ß stays), so positions hold."""
    low = text.casefold()
    if len(low) != len(text):
        low = "".join(c if len(c.casefold()) != 1 else c.casefold() for c in text)
    return low.replace("-", " ").replace("’", "'")


#: Blends of a language's name with English's, each naming both (a request for Spanglish
#: invites an answer that mixes Spanish and English). Listed, not guessed from the
#: names' letters: "Denglisch" begins like Danish's names and "Konglish" like Swahili's.
BLENDS: dict[str, str] = {
    "spanglish": "es", "espanglish": "es", "espanglés": "es", "hinglish": "hi",
    "taglish": "tl", "englog": "tl", "franglais": "fr", "frenglish": "fr",
    "denglisch": "de", "denglish": "de", "konglish": "ko", "japlish": "ja",
    "janglish": "ja", "chinglish": "zh", "runglish": "ru", "ruglish": "ru",
    "manglish": "ms", "benglish": "bn", "banglish": "bn", "tanglish": "ta",
    "greeklish": "el", "ponglish": "pl", "poglish": "pl", "swenglish": "sv",
    "dunglish": "nl", "finglish": "fi", "itanglese": "it", "hebrish": "he",
    "urdish": "ur", "arabizi": "ar", "portuglish": "pt", "turklish": "tr",
}


def named(text: str) -> tuple[frozenset[str], bool]:
    """(the languages a text names, whether it names a mix with English: a blend or a
    language written in another script than its own, Hinglish)."""
    found, mixed, _ = _scan(text)
    return found, mixed


def names_dialect(text: str) -> bool:
    """Whether a text names a dialect the judge reads as a standard language (Swiss
    German as German: `dialect`)."""
    return _scan(text)[2]


@lru_cache(maxsize=512)
def _scan(text: str) -> tuple[frozenset[str], bool, bool]:
    """(languages named, a mix named, a dialect named), in one pass. Kept per text: a
    session's every turn resends its long system prompt."""
    from loadgen.judge.text.language import english_common

    trie, table, full = _table()
    low = _normal(text)
    found: set[str] = set()
    mixed = spoken = False
    n = len(low)
    for i in range(n):
        char = low[i]
        if not char.isalpha():
            continue
        script = _script(char)
        # A word starts after a non-letter, or a letter of another script (请用Dutch回答).
        starts_word = i == 0 or not low[i - 1].isalpha() or _script(low[i - 1]) != script
        if not starts_word and script in _CASED:
            continue
        for key in trie.prefixes(low[i:i + _LONGEST]):
            codes, cased, romanized, is_dialect = table[key]
            if cased:
                if not starts_word:
                    continue
                end = i + len(key)
                stop = end
                while stop < n and low[stop].isalpha() and _script(low[stop]) == script:
                    stop += 1
                word = low[i:stop]
                if stop - end > _TAIL or (word not in full and word in english_common()):
                    continue
                if " " not in key and word != key and word in _all_names():
                    # A whole word that is a name names its own language alone.
                    codes = codes & {judged_language(raw.decode("utf-8"))
                                     for raw in _all_names()[word]}
            found |= codes
            mixed |= romanized
            spoken |= is_dialect and bool(codes)
        if starts_word and script == "Latin":
            stop = i
            while stop < n and low[stop].isalpha():
                stop += 1
            blend = BLENDS.get(low[i:stop])
            if blend is not None:
                found |= {blend, "en"}
                mixed = True
    return frozenset(found), mixed, spoken
