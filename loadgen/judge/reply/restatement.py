"""Repetition by meaning: loops that are not verbatim (`reasoning_loop`, kinds
"restatement" and "repeated answer").

#52448's loops are not always the same characters again: a model restates the same few
sentences in other words, reorders their clauses, counts on ("Try x=4: no. Let me try
x=5 ..."), or writes its whole answer a second time with a word changed. The period and
n-gram rules (`judge.reply.loops`) see through numbering, not through rewording. This rule
reads the text as segments (sentences, short ones joined until they hold
`_MIN_TOKENS` words) and asks of each one two things:

- *echo*: is it like an earlier segment? Words are compared case folded and cut to their
  first six letters (so "wants" and "wanted" are one), words of one or two letters left
  out, every number one placeholder; two segments are alike when the Jaccard similarity
  of their word sets reaches `restate_min_similarity`. Candidates are the segments just
  before and those that share a MinHash value (six hash functions over word ids given in
  order of first appearance, so the verdict is the same in every process), found in a
  dictionary: the cost is linear in the text, whatever the distance of the copy.
- *novelty*: the share of its words the text had not shown before. A loop that rewords
  runs out of words: after a few rounds its synonyms are all old. A template that walks
  through the request's rows brings a new name, id or amount in each. A number is new
  when the text has not shown it before and either the request holds it
  (`params.values`) or it does not continue an even step of the numbers just before it
  (x=4, x=5, x=6 count on; 4471, 9912, 1234 walk).

A segment that echoes and whose novelty is below the field's template threshold
(`template_min_novelty`, `reasoning_template_min_novelty`) is *stale*. Stale segments
in a row make a run; one fresh segment between two stale ones does not end it (a
connective, a restatement with a new word). A run counts when it went round: it says
each of its sentences at least twice over (a text written out twice is one copy, as
the period rules, from `loop_min_repeats`, see it too). Such a run is a loop:

- in a reply cut by `length` (or any finish but stop and tool_calls): from
  `restate_min_segments` stale segments;
- in a reply that finished: from `restate_ended_min_segments` stale segments, in prose
  (a loop that ends in an answer is still a loop when it went round long enough); or, a
  *repeated answer*, when the run holds at least three different sentences (one sentence
  said again and again is the period and n-gram rules' to count), covers at least
  `repeated_answer_min_share` of the text, and its segments are alike at
  `repeated_answer_min_similarity` each: the answer written three times or more,
  exactly or lightly reworded. Copies under labels of their own ("Voice 2:", "## Verse
  3") are parts the request asked for, held to the verbatim rules' counts (so are the
  ended restatements).

Only the last `restate_tail_chars` characters are read, and of a reply cut by `length`
only the last `_CUT_TAIL` (16,000): a loop until max_tokens shows in the reply's tail.
A finished text with no sentence end is not read at all (its loop would be in prose).
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import regex
from pydantic import Field

from loadgen.judge.reply.family import Knobs
from loadgen.judge.text.prose import is_sentence
from loadgen.judge.text.scripts import message_texts
from loadgen.judge.text.visible import without_hidden

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
# The word ids up to which no hash value wraps round `_PRIME` (about 7e8; see `_read`).
_LINEAR_IDS = min((_PRIME - 1 - b) // a for a, b in _HASHES)
# The most words `_read` reads with bit masks (ids below `_LINEAR_IDS`, masks of at most
# 8 KB): more than the 48,000 characters of the default `restate_tail_chars` hold.
_WORD_IDS = 1 << 16

_SENTENCE_END = regex.compile(r"(?<=[.!?。！？])\s+|\n+|(?<=[。！？；])")
# The same where the text holds none of "。！？；" (the last alternative never matches, nor
# the first after those marks), without a look behind at every character: a match
# that starts at ".", "!" or "?" is reported from after it (\K), where the look behind
# would have found it, and the scan goes on from the same end.
_LATIN_SENTENCE_END = regex.compile(r"[.!?]\K\s+|\n+")
_CJK_ENDS = "。！？；"
_TOKEN = regex.compile(r"\w+(?:[.,/'’-]\w+)*")
# `_TOKEN` in ASCII text (a word character is a letter, a digit or "_"), and a digit
# as str.isdigit calls one there: `re` finds them at twice the speed of `regex`.
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9_]+(?:[.,/'-][A-Za-z0-9_]+)*")
_DIGIT = re.compile(r"[0-9]")
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}]")
_NUMBER = "#"
_STOPS = frozenset(".!?。！？…\"'”’)")
# A line that names what follows ("Voice 2:", "## Verse 3", "Version B:"): copies
# under labels of their own are parts asked for (a round's voices), not an answer again.
_LABEL = regex.compile(r"\s*(?=[^\n]{1,64}$)(?:#{1,6}[ \t]*[^\n]+|(?:\S+[ \t]+){0,7}\S+:)\s*")
#: The most numbers a record keeps of its request (`params.values`).
MAX_REQUEST_VALUES = 256


class RestateKnobs(Knobs):
    """The loop family's knobs for loops by meaning (restated, counted on, an answer
    written again)."""

    restate_min_similarity: float = Field(
        default=0.4, gt=0, le=1,
        description="Two segments (sentences) say the same when the Jaccard similarity of "
        "their word sets (case folded, cut to six letters, numbers one placeholder) reaches "
        "this (loadgen.judge.reply.restatement).")
    restate_min_segments: int = Field(
        default=8, ge=2, le=1_000_000,
        description="In a reply cut by length, this many stale segments in a row (each like "
        "an earlier one and bringing almost no new words) are a loop by meaning.")
    restate_ended_min_segments: int = Field(
        default=16, ge=2, le=1_000_000,
        description="The same in a reply that finished: a loop that ends in an answer is "
        "still a loop when it went round this long (prose only).")
    repeated_answer_min_share: float = Field(
        default=0.4, gt=0, le=1,
        description="A finished text whose stale run (three sentences or more) covers this "
        "share of it is an answer written again.")
    repeated_answer_min_similarity: float = Field(
        default=0.6, gt=0, le=1,
        description="... when each of its segments is this like an earlier one.")
    repeated_answer_max_novelty: float = Field(
        default=0.15, ge=0, le=1,
        description="... and at most this share of the copy's words is new.")
    restate_tail_chars: int = Field(
        default=48_000, ge=100, le=10_000_000,
        description="How many characters at the end of a text the rule by meaning reads.")


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
    if sentence.isascii():
        return _ascii_tokens(sentence)
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


def _ascii_tokens(sentence: str) -> tuple[list[str], list[str]]:
    """`_tokens` of an ASCII sentence: the same keys, found in one pass with no branch
    per token where the sentence holds no digit. In ASCII a word character is a letter,
    a digit or "_" and no script is written without spaces, so a token is a number when
    it holds a digit and otherwise a word kept when longer than two characters; case
    folding is `lower`, which moves no token's bounds (a letter stays a word character),
    so the sentence is folded once and its tokens found in it; `_number` lowers what it
    keeps, and the characters it strips have no case."""
    found = _ASCII_TOKEN.findall(sentence.lower())
    if _DIGIT.search(sentence) is None:
        return [token[:6] for token in found if len(token) > 2], []
    words: list[str] = []
    numbers: list[str] = []
    for token in found:
        if not token.isalpha() and _DIGIT.search(token) is not None:
            words.append(_NUMBER)
            numbers.append(_number(token))
        elif len(token) > 2:
            words.append(token[:6])
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
    cjk = not text.isascii() and any(mark in text for mark in _CJK_ENDS)
    split = (_SENTENCE_END if cjk else _LATIN_SENTENCE_END).split
    return [s for s in split(text) if s and not s.isspace()]


def segments(text: str | list[str]) -> list[_Segment]:
    """The text (or its `sentences`) as segments of `_MIN_TOKENS` to `_MAX_TOKENS`
    words."""
    out: list[_Segment] = []
    pending: list[str] = []
    words: list[str] = []
    numbers: list[str] = []
    labelled = False
    for sentence in sentences(text) if isinstance(text, str) else text:
        # A label holds "#" or ":" (each alternative of `_LABEL` matches one).
        if ("#" in sentence or ":" in sentence) and _LABEL.fullmatch(sentence):
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
    lookup each), so the cost is linear in the number of segments.

    What `_read_hashed` computes, in fewer steps, for a text of at most `_WORD_IDS` words
    (every text the rule reads at the default `restate_tail_chars`; a longer one is read
    by `_read_hashed`). Word ids count from 0 in the order words are first written, and
    for an id x up to `_LINEAR_IDS` each hash function's value (a * x + b) % `_PRIME` is
    a * x + b: no reduction, strictly increasing in x. So a segment's six MinHash values
    are those of its least word id, two segments share the k-th value exactly when they
    share that id, and the six tables hold the same buckets: kept here once, keyed by the
    id. A segment's word set is kept as a bit mask of its word ids (one bit per word,
    ids and words one to one), so the words two segments share are the bits their masks
    share, and its new words are the ids it gave out (the text's words before it are the
    ids given out before it). Same candidates in the same order, the same counts, the
    same reads."""
    if sum(len(seg.words) for seg in segs) > _WORD_IDS:
        return _read_hashed(segs, echo_from, request_values)
    ids: dict[str, int] = {}
    index: dict[int, list[int]] = {}  # least word id -> the latest `_BUCKET` segments
    masks: list[int] = []
    sizes: list[int] = []
    reads: list[_Read] = []
    seen_numbers: set[str] = set()
    recent_numbers: list[int] = []
    for i, seg in enumerate(segs):
        before = len(ids)
        # Ids in the order the words are written: the same in every process (a set's
        # order of strings is not).
        word_ids = {ids.setdefault(w, len(ids)) for w in seg.words}
        least = min(word_ids)
        mask = sum(map((1).__lshift__, word_ids))
        size = len(word_ids)
        # The candidates in increasing order, as `sorted` of their set: the bucket's
        # (kept in order) before the recent ones, then the recent ones.
        lo = max(0, i - _RECENT)
        bucket = index.get(least)
        candidates: Iterable[int] = range(lo, i) if bucket is None else \
            [j for j in bucket if j < lo] + list(range(lo, i))
        best, match = 0.0, -1
        for j in candidates:
            shared = (mask & masks[j]).bit_count()
            union = size + sizes[j] - shared
            score = shared / union if union else 0.0
            if score > best:
                best, match = score, j
        # The words the text had not shown before, the number placeholder left out.
        new = len(ids) - before - (ids.get(_NUMBER, -1) >= before)
        new += _new_numbers(seg.numbers, seen_numbers, recent_numbers, request_values)
        masks.append(mask)
        sizes.append(size)
        meaning = reads[match].meaning if best >= echo_from else i
        reads.append(_Read(best, new, len(seg.words), meaning, match))
        if bucket is None:
            index[least] = [i]
        else:
            bucket.append(i)
            del bucket[:-_BUCKET]
    return reads


def _new_numbers(numbers: list[str], seen: set[str], recent: list[int],
                 request_values: frozenset[str]) -> int:
    """How many of a segment's numbers are new (see the module doc); `seen` and `recent`
    are brought up to date."""
    new = 0
    for value in numbers:
        if value not in seen and (value in request_values or not _stepped(value, recent)):
            new += 1
        seen.add(value)
        with contextlib.suppress(ValueError):
            recent.append(int(value.replace(",", "")))
    del recent[:-_STEP_LOOKBACK]
    return new


def _read_hashed(segs: list[_Segment], echo_from: float,
                 request_values: frozenset[str]) -> list[_Read]:
    """`_read` as first written: each hash value computed, word sets compared as sets.
    For a text of more than `_WORD_IDS` words, where `_read`'s bit masks would grow
    large (a text of n characters holds at most n words)."""
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
        new += _new_numbers(seg.numbers, seen_numbers, recent_numbers, request_values)
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


def find_restatement(text: str, cfg: RestateKnobs, *, cut: bool, min_novelty: float,
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


def screen(text: str, cfg: RestateKnobs, *, cut: bool) -> list[str] | None:
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


def judge(said: list[str], cfg: RestateKnobs, *, cut: bool, min_novelty: float,
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


def _repeated_answer(segs: list[_Segment], reads: list[_Read], cfg: RestateKnobs
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
