"""A frozen copy of `loadgen.judge.reply.restatement` as of 4cfef31, before its speed-up:
the reference the equivalence test (tests/loadgen/judge/reply/test_restatement_equivalence.py)
holds the rule to. Do not edit: every result of the rule must stay what this code gives.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import regex

from loadgen.judge.text.prose import is_sentence
from loadgen.judge.text.scripts import message_texts
from loadgen.judge.text.visible import without_hidden
from loadgen.scenario import VerdictConfig

_MIN_TOKENS = 5  # a segment holds at least this many words (short sentences are joined)
_MAX_TOKENS = 40  # and a run-on sentence is cut into pieces of this many
_RECENT = 6  # the segments just before, always compared
_BUCKET = 8  # the latest segments kept per MinHash value
_CUT_TAIL = 16_000  # the characters read of a reply cut by length: its loop is in its tail
_STEP_LOOKBACK = 16  # numbers a new number may continue an even step of
_HASHES = tuple((a, b) for a, b in zip(
    (0x5BD1E995, 0x27D4EB2F, 0x165667B1, 0x85EBCA77, 0xC2B2AE3D, 0x9E3779B1),
    (0x68E31DA4, 0x1B873593, 0xCC9E2D51, 0xE6546B64, 0x52DCE729, 0x38495AB5), strict=True))
_PRIME = (1 << 61) - 1

_SENTENCE_END = regex.compile(r"(?<=[.!?。！？])\s+|\n+|(?<=[。！？；])")
_TOKEN = regex.compile(r"\w+(?:[.,/'’-]\w+)*")
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}]")
_NUMBER = "#"
_STOPS = frozenset(".!?。！？…\"'”’)")
# A line that names what follows ("Voice 2:", "## Verse 3", "Version B:"): copies
# under labels of their own are parts asked for (a round's voices), not an answer again.
_LABEL = regex.compile(r"\s*(?=[^\n]{1,64}$)(?:#{1,6}[ \t]*[^\n]+|(?:\S+[ \t]+){0,7}\S+:)\s*")
#: The most numbers a record keeps of its request (`params.values`).
MAX_REQUEST_VALUES = 256


@dataclass(frozen=True, slots=True)
class Restatement:
    """A run of stale segments judged a loop: what the report shows."""

    kind: str  # "restatement" or "repeated answer"
    unit: str  # the last stale segment
    repeats: int  # stale segments in the run


@dataclass(slots=True)
class _Segment:
    text: str
    words: list[str]  # word keys, numbers as _NUMBER
    numbers: list[str]  # the numbers as written
    labelled: bool = False  # it opens under a label line ("Voice 2:", "## Verse 3")


def _tokens(sentence: str) -> tuple[list[str], list[str]]:
    """Word keys and numbers of a sentence (see the module doc); a script written
    without spaces is read two characters at a time."""
    words: list[str] = []
    numbers: list[str] = []
    for token in _TOKEN.findall(sentence):
        if token.isalpha() and token.isascii():  # the common case, at C speed
            if len(token) > 2:
                words.append(token.casefold()[:6])
        elif any(ch.isdigit() for ch in token):
            words.append(_NUMBER)
            numbers.append(_number(token))
        elif _UNSPACED.search(token):
            words.extend(token[i:i + 2] for i in range(max(1, len(token) - 1)))
        elif len(token) > 2:
            words.append(token.casefold()[:6])
    return words, numbers


def _number(token: str) -> str:
    return token.strip(".,'’-").lower()


def request_numbers(messages: list[dict[str, Any]]) -> list[str]:
    """The numbers and codes a request's messages hold (tokens with a digit, as the rule
    reads them), the first `MAX_REQUEST_VALUES` distinct ones: what a template may walk."""
    found: dict[str, None] = {}
    for text in message_texts(messages):
        for token in _TOKEN.findall(text):
            if any(ch.isdigit() for ch in token):
                found.setdefault(_number(token))
                if len(found) >= MAX_REQUEST_VALUES:
                    return list(found)
    return list(found)


def sentences(text: str) -> list[str]:
    """The text's sentences (and lines), blank ones left out."""
    return [s for s in _SENTENCE_END.split(text) if s and not s.isspace()]


def segments(text: str | list[str]) -> list[_Segment]:
    """The text (or its `sentences`) as segments of `_MIN_TOKENS` to `_MAX_TOKENS`
    words."""
    out: list[_Segment] = []
    pending: list[str] = []
    words: list[str] = []
    numbers: list[str] = []
    labelled = False
    for sentence in sentences(text) if isinstance(text, str) else text:
        if _LABEL.fullmatch(sentence):
            labelled = True
        w, n = _tokens(sentence)
        pending.append(sentence)
        words += w
        numbers += n
        if len(words) < _MIN_TOKENS:
            continue
        joined = " ".join(pending)
        while len(words) > _MAX_TOKENS:
            out.append(_Segment(joined, words[:_MAX_TOKENS], []))
            words = words[_MAX_TOKENS:]
        out.append(_Segment(joined, words, numbers, labelled))
        pending, words, numbers, labelled = [], [], [], False
    if pending and words:
        out.append(_Segment(" ".join(pending), words, numbers, labelled))
    return out


def _stepped(value: str, recent: list[int]) -> bool:
    """The number continues an even step of the numbers just before it (a counter, or a
    value computed from one), e.g. 7 after 3 and 5."""
    try:
        v = int(value.replace(",", ""))
    except ValueError:
        return False
    return any(u != v and 2 * u - v in recent[:i] for i, u in enumerate(recent))


@dataclass(frozen=True, slots=True)
class _Read:
    """What one segment is to the text before it."""

    similarity: float  # to the likest earlier segment (Jaccard of the word sets)
    new: int  # words and numbers the text had not shown before (see the module doc)
    words: int
    meaning: int  # the first segment of the chain of echoes it belongs to
    match: int  # the likest earlier segment, -1 when none


def _read(segs: list[_Segment], echo_from: float, request_values: frozenset[str]
          ) -> list[_Read]:
    """Each segment's likest earlier segment and its new words, in one pass: candidates
    are the `_RECENT` segments before and those sharing a MinHash value (a dictionary
    lookup each), so the cost is linear in the number of segments."""
    ids: dict[str, int] = {}
    # Each hash function's value of each word id, computed once per word.
    values: list[list[int]] = [[] for _ in _HASHES]
    index: list[dict[int, list[int]]] = [{} for _ in _HASHES]
    sets: list[frozenset[str]] = []
    reads: list[_Read] = []
    seen_words: set[str] = set()
    seen_numbers: set[str] = set()
    recent_numbers: list[int] = []
    for i, seg in enumerate(segs):
        keys = frozenset(seg.words)
        # Ids in the order the words are written: the same in every process (a set's
        # order of strings is not).
        written = dict.fromkeys(seg.words)
        for w in written:
            if w not in ids:
                x = ids[w] = len(ids)
                for (a, b), column in zip(_HASHES, values, strict=True):
                    column.append((a * x + b) % _PRIME)
        word_ids = list(map(ids.__getitem__, written))
        signature = [min(map(column.__getitem__, word_ids)) for column in values]
        candidates = set(range(max(0, i - _RECENT), i))
        for table, h in zip(index, signature, strict=True):
            candidates.update(table.get(h, ()))
        best, match = 0.0, -1
        for j in sorted(candidates):
            shared = len(keys & sets[j])
            union = len(keys) + len(sets[j]) - shared
            score = shared / union if union else 0.0
            if score > best:
                best, match = score, j
        fresh = keys - seen_words
        new = len(fresh) - (_NUMBER in fresh)
        for value in seg.numbers:
            if value not in seen_numbers and (value in request_values
                                              or not _stepped(value, recent_numbers)):
                new += 1
            seen_numbers.add(value)
            with contextlib.suppress(ValueError):
                recent_numbers.append(int(value.replace(",", "")))
        del recent_numbers[:-_STEP_LOOKBACK]
        seen_words.update(keys)
        sets.append(keys)
        meaning = reads[match].meaning if best >= echo_from else i
        reads.append(_Read(best, new, len(seg.words), meaning, match))
        for table, h in zip(index, signature, strict=True):
            bucket = table.setdefault(h, [])
            bucket.append(i)
            del bucket[:-_BUCKET]
    return reads


def _went_round(run: list[int], reads: list[_Read]) -> bool:
    """The run says each of its sentences at least twice over (three times with the
    first): a text written out twice is one copy, which the period rules count too
    (`loop_min_repeats`), not a round."""
    return len(run) >= 2 * len({reads[i].meaning for i in run})


def _in_order(run: list[int], reads: list[_Read]) -> list[int]:
    """The longest part of a run that copies in order: each segment like the one after
    (or two after) the segment its predecessor was like, as a second copy of an answer
    is; sentences drawn again at random from a few are not."""
    best: list[int] = run[:1]
    chain: list[int] = run[:1]
    for prev, cur in itertools.pairwise(run):
        if 0 < reads[cur].match - reads[prev].match <= 2:
            chain.append(cur)
        else:
            chain = [cur]
        if len(chain) > len(best):
            best = list(chain)
    return best


def _in_prose(segs: Iterable[_Segment]) -> bool:
    """Every segment ends as a sentence does (no line of verse or code broken where the
    line ends), most are sentences rather than structured data, and none opens under a
    label: parts the request asked for (a round's voices, a song's
    refrain) are held to the verbatim rules' counts."""
    flags = []
    for seg in segs:
        if seg.labelled or seg.text.rstrip()[-1:] not in _STOPS:
            return False  # a label, or a line that ends where no sentence does
        flags.append(is_sentence(seg.text))
    return sum(flags) * 2 > len(flags)


def _runs(stale: list[bool]) -> Iterator[list[int]]:
    """The stale segments of each run: stale segments in a row, one fresh segment
    between two stale ones allowed."""
    run: list[int] = []
    for i, is_stale in enumerate(stale):
        if is_stale:
            run.append(i)
        elif run and i - run[-1] > 1:
            yield run
            run = []
    if run:
        yield run


def _ended_at_most(said: list[str]) -> int:
    """At most how many segments of these sentences end as a sentence does, at C speed
    but for the sentences that end so (a screen: a finished text's loop by meaning is a
    run of such segments, `_in_prose`, six at the fewest for an answer written three
    times; `restate_ended_min_segments` for a restatement). A segment ends where its
    last sentence does; a sentence of n characters holds at most n words, and with the
    fewer than `_MIN_TOKENS` words of short sentences joined to it makes at most
    ceil((n + 4) / `_MAX_TOKENS`) segments."""
    return sum(-(-(len(s) + _MIN_TOKENS - 1) // _MAX_TOKENS) for s in said
               if s.rstrip()[-1:] in _STOPS)


def find_restatement(text: str, cfg: VerdictConfig, *, cut: bool, min_novelty: float,
                     request_values: Iterable[str] = ()) -> Restatement | None:
    """A loop by meaning in the text (see the module doc), or None.

    `cut`: the reply stopped while this text was being written. `min_novelty`: the
    field's template threshold. `request_values`: the numbers and codes the request
    holds (`params.values`), which a template walks through.
    """
    said = screen(text, cfg, cut=cut)
    if said is None:
        return None
    return judge(said, cfg, cut=cut, min_novelty=min_novelty, request_values=request_values)


def screen(text: str, cfg: VerdictConfig, *, cut: bool) -> list[str] | None:
    """The sentences of the part of the text the rule reads, or None when that part
    cannot hold a loop by meaning: a finished text whose sentences cannot make
    `restate_ended_min_segments` (or six, an answer written three times) segments that
    end as sentences do (`_ended_at_most`), a text with no sentence end at all found at
    C speed. Sound: what it screens out, `judge` would pass."""
    tail = text[-min(cfg.restate_tail_chars, _CUT_TAIL if cut else len(text)):]
    if not cut and not any(stop in tail for stop in _STOPS):
        return None  # no sentence ends: a finished text holds a loop only in prose
    said = sentences(without_hidden(tail))
    if not cut and _ended_at_most(said) < min(cfg.restate_ended_min_segments, 6):
        return None  # a finished text holds a loop only in prose (sentences that end)
    return said


def judge(said: list[str], cfg: VerdictConfig, *, cut: bool, min_novelty: float,
          request_values: Iterable[str] = ()) -> Restatement | None:
    """`find_restatement` on the sentences of the text's tail, unscreened."""
    segs = segments(said)
    if len(segs) < 4:
        return None  # no run of three stale segments after a first
    values = frozenset(_number(str(v)) for v in request_values)
    reads = _read(segs, cfg.restate_min_similarity, values)
    stale = [r.similarity >= cfg.restate_min_similarity and r.new < min_novelty * r.words
             for r in reads]
    for run in _runs(stale):
        if not _went_round(run, reads):
            continue
        unit = segs[run[-1]].text.strip()[:300]
        if cut and len(run) >= cfg.restate_min_segments:
            return Restatement("restatement", unit, len(run))
        if not cut and len(run) >= cfg.restate_ended_min_segments \
                and _in_prose(segs[run[0]:run[-1] + 1]):
            return Restatement("restatement", unit, len(run))
    if cut:
        return None
    return _repeated_answer(segs, reads, cfg)


def _repeated_answer(segs: list[_Segment], reads: list[_Read], cfg: VerdictConfig
                     ) -> Restatement | None:
    """A finished text that writes its answer again: a run of segments each like an
    earlier one at `repeated_answer_min_similarity`, three or more of them copied in
    order, that went round (`_went_round`: two copies after the first), covers
    `repeated_answer_min_share` of the text and brings few new words
    (`repeated_answer_max_novelty`), in prose."""
    total = sum(len(s.text) for s in segs)
    alike = [r.similarity >= cfg.repeated_answer_min_similarity for r in reads]
    for run in _runs(alike):
        ordered = _in_order(run, reads)
        copy = segs[run[0]:run[-1] + 1]
        span = sum(len(s.text) for s in copy)
        if len({reads[i].meaning for i in ordered}) < 3 or not _went_round(run, reads) \
                or span < cfg.repeated_answer_min_share * total:
            continue
        new = sum(reads[i].new for i in run)
        words = sum(reads[i].words for i in run)
        if new <= cfg.repeated_answer_max_novelty * words and _in_prose(copy):
            return Restatement("repeated answer", segs[run[-1]].text.strip()[:300], len(run))
    return None
