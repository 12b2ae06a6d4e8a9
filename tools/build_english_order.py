"""Rebuild loadgen/judge/reply/garbled/english_order.json: how English orders its function words.

The `word_order` detector of `garbled` asks whether a stretch of English running text
orders its words as English does. What it needs is small: how often each of English's
100 most frequent words (wordfreq's list: the function words), a content word, a full
stop and a comma follow each other. Those counts are taken here from two kinds of
English: the prose of Python's own documentation (`pydoc_data.topics`, the language
reference and library topics the standard library ships: technical, impersonal) and
Debian's `fortunes` package (`/usr/share/games/fortunes`: quotations, jokes and
dialogue, first and second person). Only counts are written, no text; the file names
the versions it was built from, so anyone can rebuild the same table.

    apt-get install fortunes && python tools/build_english_order.py
"""

from __future__ import annotations

import itertools
import json
import platform
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from pydoc_data.topics import topics

import regex
import wordfreq

OUT = (Path(__file__).resolve().parents[1] / "loadgen" / "judge" / "reply" / "garbled"
       / "english_order.json")
FUNCTION_WORDS = 100
TOKEN = regex.compile(r"[A-Za-z]+(?:'[a-z]+)?|[.!?]|[,;:]")


FORTUNES = Path("/usr/share/games/fortunes")
#: Cookies that are pictures or lists, not sentences.
NOT_PROSE = frozenset({"art", "ascii-art", "definitions"})


def paragraphs() -> list[str]:
    out = [p for text in topics.values() for p in text.split("\n\n")
           if not p.startswith("   ")]  # code examples are indented
    for path in sorted(FORTUNES.iterdir()):
        if path.suffix or path.is_symlink() or path.name in NOT_PROSE:
            continue
        out += [" ".join(cookie.split()) for cookie in path.read_text(errors="replace")
                .split("\n%\n")]
    return out


def fortunes_version() -> str:
    status = Path("/var/lib/dpkg/status").read_text()
    block = status.split("Package: fortunes\n", 1)[1].split("\n\n", 1)[0]
    return next(line.split(": ", 1)[1] for line in block.splitlines()
                if line.startswith("Version: "))


def main() -> None:
    vocabulary = wordfreq.top_n_list("en", FUNCTION_WORDS)
    known = set(vocabulary)
    bigrams: Counter[tuple[str, str]] = Counter()
    unigrams: Counter[str] = Counter()
    for paragraph in paragraphs():
        classes = []
        for token in TOKEN.findall(paragraph):
            low = token.lower()
            classes.append(low if low in known else "<s>" if token in ".!?"
                           else "<,>" if token in ",;:" else "<w>")
        unigrams.update(classes)
        bigrams.update(itertools.pairwise(classes))
    table = {
        "source": f"pydoc_data.topics of Python {platform.python_version()} and Debian's "
                  f"fortunes {fortunes_version()} (wordfreq {version('wordfreq')} top "
                  f"{FUNCTION_WORDS} English words)",
        "function_words": vocabulary,
        "unigrams": dict(sorted(unigrams.items())),
        "bigrams": sorted([a, b, n] for (a, b), n in bigrams.items()),
    }
    OUT.write_text(json.dumps(table, separators=(",", ":")) + "\n")
    print(f"{OUT}: {sum(unigrams.values())} tokens, {len(bigrams)} pairs")


if __name__ == "__main__":
    main()
