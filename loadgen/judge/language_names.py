"""Which languages a request names, by any name any language has for them.

The names are the language library's (`language_data`, which `langcodes.Language.find`
reads): every name of every language in every language CLDR and its extra lists know,
aliases included (Flemish, Valencian, Moldovan, Bokmål, Farsi, Castilian, 粤语,
"по-французски" from французский). A named tag is resolved to a language the identifier
knows (`judged_language`): its own code, its macrolanguage's (Cantonese and Mandarin are
Chinese), or the closest by CLDR's language distance (Norwegian is Bokmål, Swiss German
is German); languages of one macrolanguage, or a distance apart that CLDR counts as one
language, are one language to the judge (`equivalents`): Bokmål and Nynorsk, Croatian,
Bosnian and Serbian. A blend of a name with English's ("Spanglish", "Hinglish",
"Franglais") names both.

A request is read once, in one pass: at each word's start (anywhere, in scripts written
without spaces between words and in scripts whose words take clitics before them) the
names that begin there are looked up in a trie, so the cost is linear in the request.
A name in a cased alphabet may end in an inflection (four letters at most), but a word
that is an everyday English word and no language name ("check", which begins like
Spanish's "checo") names nothing.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

#: Letters an inflected name may carry past its stem ("русск|ом", "Englis|chen").
_TAIL = 4
#: The longest name looked up, in characters.
_LONGEST = 40
#: CLDR's language distance at or below which two languages are one to the judge
#: (macrolanguage members and standard variants: no/nb 1, nl-BE/nl 4, gsw/de 8, hr/bs 8).
_SAME = 10
_CASED = ("Latin", "Cyrillic", "Greek")


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
def judged_language(tag: str) -> str | None:
    """The identifier's language for a language tag: its own (deprecated codes replaced:
    mo is ro), its macrolanguage's, or the one within `_SAME` (None for a language the
    judge cannot tell). Read from langcodes' tables, the tag's language subtag alone."""
    from langcodes.data_dicts import LANGUAGE_REPLACEMENTS, MACROLANGUAGES

    codes = judged_codes()
    given = tag.split("-")[0].lower()
    lang = LANGUAGE_REPLACEMENTS.get(given, given).split("-")[0]
    renamed = {LANGUAGE_REPLACEMENTS[c].split("-")[0]: c for c in codes
               if c in LANGUAGE_REPLACEMENTS}  # tl is replaced by fil
    for candidate in (given, lang, renamed.get(lang), MACROLANGUAGES.get(lang),
                      _near().get(lang),
                      _near().get(MACROLANGUAGES.get(lang, ""))):
        if candidate in codes:
            return candidate
    return None


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
    from loadgen.judge.garbled.words import script_of

    return script_of(name)


@cache
def _table() -> tuple[Any, dict[str, tuple[frozenset[str], bool, bool]], frozenset[str]]:
    """(trie of keys, key -> (languages, a cased stem, romanized), full names): every
    name of a language the judge knows, from the language library's name trie."""
    import marisa_trie
    from language_data.names import code_to_names, load_trie, normalize_name
    from language_data.util import data_filename

    names = load_trie(data_filename("trie/und/name_to_language.marisa"))
    # The trie keeps a name's shortest unique form ("hind"); CLDR's display names whole.
    every = [(name, raw.decode("utf-8")) for name, raw in names.items()]
    every += [(normalize_name(name), code) for code in sorted(judged_codes())
              for name in code_to_names(code).values()]
    keys: dict[str, tuple[set[str], bool, bool]] = {}
    full: set[str] = set()
    for name, tag in every:
        code = judged_language(tag)
        if code is None or any(c.isdigit() for c in name):
            continue
        cased = _script(name) in _CASED
        if (cased and len(name) < 4) or len(name) < 2:
            continue
        romanized = _romanized(tag)
        full.add(name)
        key = name[:max(4, len(name) - 2)] if cased and " " not in name else name
        entry = keys.setdefault(key, (set(), cased, False))
        entry[0].add(code)
        keys[key] = (entry[0], cased, entry[2] or romanized)
    trie = marisa_trie.Trie(list(keys))
    table = {k: (frozenset(v[0]), v[1], v[2]) for k, v in keys.items()}
    return trie, table, frozenset(full)


def _normal(text: str) -> str:
    """As the name trie spells names: case-folded, hyphens and apostrophes plain, one
    character for one (ß stays), so positions hold."""
    low = text.casefold()
    if len(low) != len(text):
        low = "".join(c if len(c.casefold()) != 1 else c.casefold() for c in text)
    return low.replace("-", " ").replace("’", "'")


@cache
def _english_blend_tails() -> frozenset[str]:
    """Endings (four letters and more) of English's names in Latin letters: what a blend
    with English ends in ("glish", "glais", "glisch")."""
    _, table, full = _table()
    english = [n for n in full if table.get(n[:max(4, len(n) - 2)], (frozenset(),))[0]
               == frozenset({"en"}) and n.isascii() and " " not in n]
    return frozenset(n[-k:] for n in english for k in range(4, len(n) - 1))


def _blend(word: str) -> frozenset[str]:
    """The languages a blend with English names ("spanglish": Spanish and English)."""
    trie, table, _ = _table()
    for tail in sorted((t for t in _english_blend_tails() if word.endswith(t)), key=len):
        head = word[:-len(tail)]
        if len(head) < 2:
            continue
        codes = {c for key in trie.keys(head) for c in table[key][0]} - {"en"}
        if 1 <= len(codes) <= 2:
            return frozenset({*codes, "en"})
    return frozenset()


@lru_cache(maxsize=512)
def named(text: str) -> tuple[frozenset[str], bool]:
    """(the languages a text names, whether it names a mix with English: a blend or a
    language written in another script than its own, Hinglish). Kept per text: a
    session's every turn resends its long system prompt."""
    from loadgen.judge.language import english_common

    trie, table, full = _table()
    low = _normal(text)
    found: set[str] = set()
    mixed = False
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
            codes, cased, romanized = table[key]
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
            found |= codes
            mixed |= romanized
        if starts_word and char.isascii():
            stop = i
            while stop < n and low[stop].isalpha():
                stop += 1
            word = low[i:stop]
            if len(word) >= 7 and word not in english_common() and word not in full:
                blend = _blend(word)
                found |= blend
                mixed |= bool(blend)
    return frozenset(found), mixed
