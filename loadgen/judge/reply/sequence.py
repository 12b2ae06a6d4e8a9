"""`disordered_stream`: a reply's deltas, in the order they came, that no honest server sends.

The record keeps a reply's text joined; what the order of its deltas showed is gone by
then. The client (`engine/client.py`) therefore looks at the deltas once, when the
stream ends, and keeps only what it saw wrong (`stream_facts` -> `record.sequence`);
this module owns both halves, so the rule and its thresholds live in one place.

Honest token streams repeat short deltas all the time: "\\n", " ", "=", "--", " ha",
" that that", the cells of a table rule, a line of code written twice, a chorus. The
rules are therefore stated by class, with their thresholds:

- **a run replayed**: a run of consecutive deltas (one or more, the same SSE event sent
  twice included) sent again right after itself, the run at least `MIN_REPLAY_CHARS`
  characters with at least `MIN_REPLAY_WORDS` distinct words of letters, and not made of
  whole lines. A writer doubles a whole line (a chorus, a line of code); a server that
  re-sends events does it wherever its events end. A run sent a third time is a loop,
  judged by the loop rule (`judge.reply.loops`), not here. Runs up to `MAX_REPLAY_CHARS` long
  are looked for.
- **deltas each sent twice**: at least `MIN_DOUBLED_WORDS` different words whose delta
  came twice in a row (not three times: " blah blah blah" is prose), and at least one
  in `DOUBLED_SHARE` of the deltas that carry a word. An honest text doubles a word now
  and then ("that that", "had had", a random filler); a server that re-sends events
  doubles many.
- **reasoning after the answer began**: a reasoning delta after a content delta that
  showed something (whitespace is no answer). A reasoning parser sends reasoning first
  and content after its end marker: reasoning that resumes, or content sent before the
  reasoning, is the reasoning channel streamed as content and back.
- **the reasoning repeated into the content**: the content holds the whole reasoning
  (at least `MIN_ECHO_CHARS` characters) and `MIN_ANSWER_CHARS` more: the reasoning
  stream copied into the content before the answer. A model may draft its answer in
  its reasoning and then write it (the content is then the draft, or holds a part of
  the reasoning), but its answer does not begin with all of its thinking (judged on the
  joined text, `sequence_problems`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import accumulate, compress
from operator import eq
from typing import Any

import regex

from loadgen.judge.reply.family import Family, Found
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict

MIN_REPLAY_CHARS = 32
MAX_REPLAY_CHARS = 1024
MIN_REPLAY_WORDS = 3
MIN_DOUBLED_WORDS = 6
#: Of the deltas that carry a word, at least one in this many sent twice.
DOUBLED_SHARE = 10
MIN_ECHO_CHARS = 80
#: What the content holds beyond the echoed reasoning: the answer after it.
MIN_ANSWER_CHARS = 20
#: The longest run looked for: one comparison of the deltas with themselves each.
MAX_REPLAY_DELTAS = 3

_WORD = regex.compile(r"\p{L}{2,}")
_LONG_WORD = regex.compile(r"\p{L}{3,}")


def _words(text: str, pattern: regex.Pattern[str] = _WORD) -> set[str]:
    return {w.casefold() for w in pattern.findall(text)}


def _whole_lines(text: str, left: int, start: int, period: int) -> bool:
    """Whether the text doubled around `start` (it repeats itself `period` later from
    `left` on) holds whole lines twice: a copy that starts a line, ends one, and comes
    again right after itself."""
    y = left - 1
    while y <= start:
        if y < 0 or text[y] == "\n":
            copy = text[y + 1:y + 1 + period]
            if copy.endswith("\n") and text[y + 1 + period:y + 1 + 2 * period] == copy:
                return True
        y = text.find("\n", y + 1, start + 1)
        if y < 0:
            return False
    return False


def _common_prefix(text: str, a: int, b: int, limit: int) -> int:
    """How many characters from `a` on equal those from `b` on (at most `limit`)."""
    lo, hi = 0, min(limit, len(text) - a)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text[a:a + mid] == text[b:b + mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(text: str, a: int, b: int, limit: int) -> int:
    """How many characters before `a` equal those before `b` (at most `limit`)."""
    lo, hi = 0, min(limit, a)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text[a - mid:a] == text[b - mid:b]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def replayed_run(deltas: Sequence[str]) -> str | None:
    """The first run of 1 to `MAX_REPLAY_DELTAS` deltas sent again right after itself
    (the class above), said in one sentence, or None. One comparison of the deltas with
    themselves a run's length later, per length, in C; only where a whole run's worth
    matched is the text looked at."""
    if len(deltas) < 2:
        return None
    return _replayed_run(deltas, bytes(map(eq, deltas[1:], deltas[:-1])))


def _replayed_run(deltas: Sequence[str], adjacent: bytes) -> str | None:
    """`replayed_run`, with the comparison of each delta with the one before done."""
    text: str | None = None
    ends: list[int] = []
    for k in range(1, min(MAX_REPLAY_DELTAS, len(deltas) // 2) + 1):
        same = adjacent if k == 1 else bytes(map(eq, deltas[k:], deltas[:-k]))
        want = b"\x01" * k
        i = same.find(want)
        while i >= 0:
            if text is None:
                text = "".join(deltas)
                ends = [0, *accumulate(map(len, deltas))]
            found = _replay_at(text, ends, i, k)
            if found is not None:
                return found
            i = same.find(want, i + 1)
    return None


def _replay_at(text: str, ends: list[int], i: int, k: int) -> str | None:
    """Deltas i..i+k sent again as i+k..i+2k: said, if the run passes the thresholds."""
    start, mid, end = ends[i], ends[i + k], ends[i + 2 * k]
    period = mid - start
    if period < MIN_REPLAY_CHARS:
        return None
    unit = text[start:mid]
    if text[end:end + period] == unit:
        return None  # a third time: a loop, the loop rule's
    if len(unit.strip()) < MIN_REPLAY_CHARS or len(_words(unit)) < MIN_REPLAY_WORDS:
        return None
    # The stretch that repeats itself a period later: a copy of whole lines inside it is
    # a line written twice (a chorus, a line of code), not a replay.
    left = start - _common_suffix(text, start, mid, period)
    # The unit's own shortest period (a run of three 40-character entries repeats every
    # 40): the text running on with it before and after the pair by a whole such period
    # more is a third copy (periodic text cut anywhere), not a replay.
    shortest = (unit + unit).find(unit, 1)
    if start - left + _common_prefix(text, end, mid, period) >= shortest:
        return None
    if _whole_lines(text, left, start, period):
        return None
    return (f"a run of {k} deltas ({period} characters) sent again right after itself "
            f"at delta {i + k}: {unit[:80]!r}")


def doubled_deltas(deltas: Sequence[str]) -> str | None:
    """Deltas each sent twice in a row (the class above), said in one sentence, or None."""
    if len(deltas) < 2:
        return None
    return _doubled_deltas(deltas, bytes(map(eq, deltas[1:], deltas[:-1])))


def _doubled_deltas(deltas: Sequence[str], adjacent: bytes) -> str | None:
    """`doubled_deltas`, with the comparison of each delta with the one before done."""
    if adjacent.count(1) < MIN_DOUBLED_WORDS:
        return None
    doubled = set(compress(range(1, len(deltas)), adjacent))
    if len(doubled) < MIN_DOUBLED_WORDS:
        return None
    words: dict[str, int] = {}
    for i in sorted(doubled):
        if i - 1 in doubled or i + 1 in doubled:
            continue  # three or more in a row: prose ("blah blah blah"), or a loop
        for word in _words(deltas[i], _LONG_WORD):
            words.setdefault(word, i)
    if len(words) < MIN_DOUBLED_WORDS:
        return None
    wordy = sum(1 for d in deltas if _LONG_WORD.search(d))
    if len(words) * DOUBLED_SHARE < wordy:
        return None  # a long text doubles a word here and there
    shown = ", ".join(repr(deltas[i]) for i in sorted(set(words.values()))[:5])
    return (f"{len(words)} different words each sent twice in a row, as deltas: {shown}")


def stream_facts(reasoning: Sequence[str], content: Sequence[str],
                 late_reasoning: int) -> dict[str, Any] | None:
    """What the ordered deltas of one reply showed wrong, for `record.sequence`; None
    when nothing (the record stays as small as before). `late_reasoning`: reasoning
    deltas that came after the answer had begun (the client counts them as they come)."""
    facts: dict[str, Any] = {}
    for field, deltas in (("reasoning", reasoning), ("content", content)):
        if len(deltas) < 2:
            continue
        adjacent = bytes(map(eq, deltas[1:], deltas[:-1]))
        problem = _replayed_run(deltas, adjacent) or _doubled_deltas(deltas, adjacent)
        if problem is not None:
            facts[field] = problem
    if late_reasoning:
        facts["late_reasoning"] = late_reasoning
    return facts or None


def sequence_problems(record: RequestRecord) -> list[str]:
    """Why a reply's stream is disordered, one sentence each; [] when it is not."""
    problems: list[str] = []
    seen = record.sequence if isinstance(record.sequence, dict) else {}
    for field in ("reasoning", "content"):
        if isinstance(seen.get(field), str):
            problems.append(f"{field}: {seen[field]}")
    late = seen.get("late_reasoning")
    if isinstance(late, int) and not isinstance(late, bool) and late > 0:
        problems.append(f"{late} reasoning deltas came after the answer had begun in the "
                        "content (reasoning streamed as content and back)")
    reasoning = record.reasoning.strip()
    if len(reasoning) >= MIN_ECHO_CHARS and \
            len(record.content.strip()) >= len(reasoning) + MIN_ANSWER_CHARS and \
            reasoning in record.content:
        problems.append(f"the content holds the whole reasoning ({len(reasoning)} "
                        f"characters) and an answer after it: {reasoning[:60]!r}")
    return problems


def _check(record: RequestRecord, cfg: object) -> Found | None:
    disorder = sequence_problems(record)
    return Found(frozenset({Verdict.DISORDERED_STREAM}), {"stream": disorder}) \
        if disorder else None


def _describe(found: Mapping[str, Any]) -> list[str]:
    return [f"stream: {problem}" for problem in found["stream"]]


FAMILY = Family(name="sequence", verdicts=frozenset({Verdict.DISORDERED_STREAM}),
                findings={"stream": list[str]}, describe=_describe, check=_check)
