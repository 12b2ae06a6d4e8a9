"""`garbled` evidence that adds up: salad made of pieces that each stay under one
detector's threshold.

Each detector flags only strong evidence of one kind. A broken reply can carry a little
of every kind in one stretch: two replacement characters where four make a burst, two
script switches inside words where four do, a run of 20 glued letters where three runs
of 32 do, a dozen letters spaced apart where 24 do. Each is half a finding; two
different kinds of half a finding within `garbled_evidence_span_chars` (240) of each
other are one (the finding names both). The halves are the detectors' own rules at
half their thresholds (a marker burst of two with one repeated, two script switches,
a chain of 12 spaced letters), and a single glued run of 16 letters or more that is no
word of the text's languages (a long real word, a German compound or a chemical name,
is a word). Honest text shows one such half now and then (a spelled-out word, a
mojibake example); two kinds in one stretch it does not (docs/testing.md).
"""

from __future__ import annotations

import itertools

import numpy as np

from loadgen.judge.reply.garbled.fragments import spaced_letters
from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.garbled.markers import markers
from loadgen.judge.reply.garbled.script_mix import script_switches
from loadgen.judge.text import language

#: A glued run this long (half a glued run) that is no word is half a finding.
_HALF_GLUED_LETTERS = 16
_GLUED_MIN_DISTINCT = 10


def _glued_run(text: str, cased: np.ndarray, starts: np.ndarray, ends: np.ndarray,
               languages: tuple[str, ...]) -> tuple[int, int] | None:
    """The first run of 16 letters or more, lower case after the first, of ten distinct
    letters or more, that is no word of the text's languages (nor English)."""
    long = np.flatnonzero((ends - starts) >= _HALF_GLUED_LETTERS)
    langs = tuple(dict.fromkeys((*languages, "en")))
    for i in long.tolist():
        run = text[int(starts[i]):int(ends[i])]
        if not run[1:].islower() or len(set(run.lower())) < _GLUED_MIN_DISTINCT:
            continue
        if not language.is_known(run.casefold(), langs):
            return int(starts[i]), int(ends[i])
    return None


def halves(text: str, points: np.ndarray, scr: np.ndarray | None, cased: np.ndarray,
           run_bounds: tuple[np.ndarray, np.ndarray], languages: tuple[str, ...],
           explained: frozenset[str], cfg: GarbledKnobs) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each kind of half a finding in the text, the first of each."""
    half = cfg.model_copy(update={
        "garbled_marker_burst": max(2, cfg.garbled_marker_burst // 2),
        "garbled_script_switches": max(2, cfg.garbled_script_switches // 2),
        "garbled_spaced_letters": max(8, cfg.garbled_spaced_letters // 2)})
    found: list[tuple[str, int, int]] = []
    hit = markers(text, points, half)
    if hit:
        found.append(("markers", hit[1], hit[2]))
    if scr is not None:
        hit = script_switches(points, scr, explained, half)
        if hit:
            found.append(("scripts", hit[1], hit[2]))
    hit = spaced_letters(text, points, half)
    if hit:
        found.append(("spaced_letters", hit[1], hit[2]))
    glued = _glued_run(text, cased, *run_bounds, languages)
    if glued:
        found.append(("glued_fragments", *glued))
    return found


def adds_up(text: str, points: np.ndarray, scr: np.ndarray | None, cased: np.ndarray,
            run_bounds: tuple[np.ndarray, np.ndarray], languages: tuple[str, ...],
            explained: frozenset[str], cfg: GarbledKnobs) -> tuple[str, int, int] | None:
    """Two kinds of half a finding within the evidence span: one finding."""
    found = halves(text, points, scr, cased, run_bounds, languages, explained, cfg)
    span = cfg.garbled_evidence_span_chars
    for a, b in itertools.combinations(sorted(found, key=lambda f: f[1]), 2):
        if b[1] - a[2] <= span:
            return (f"half a finding of each of {a[0]} and {b[0]} within {span} chars "
                    f"(at {a[1]} and {b[1]}): evidence that adds up", a[1], max(a[2], b[2]))
    return None
