"""RequestRecord -> verdicts: the failure taxonomy's rules, one function each.

Rules (a record can carry several; `classify` orders them most severe first):

- stuck_in_reasoning: finish_reason `length`, no content, no tool calls, reasoning
  present. The #52448 signature: the model never left its reasoning channel.
- empty_content: the reply finished any other way (or by length with no text at all)
  with no content and no tool calls. Tool calls count as content.
- truncated: finish_reason `length` with some content or tool calls (the answer
  started but the cap cut it).
- reasoning_loop: reasoning or content ENDS in a loop: either an exact repeating
  period (a unit of 8..2000 chars repeated >= 4 times over >= 200 chars), or a word
  n-gram (8 words) seen >= 6 times in the last 400 words. A period of one token
  ("0000...") is caught too: it also repeats with any multiple of its length.
- token_leak: special tokens (`<|...|>`, `<｜...｜`, BOS/EOS), think tags or tool-call
  markup in the visible content; special tokens or think tags inside reasoning (a
  parser that failed to split, or BOS bursts from NaN logits).
- http_error / timeout / stream_error: the path to the model failed; no output rule
  is applied to such a record.
- divergent: run level (`judge.run_level`), never set on a single record here.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from loadgen.records import ErrorKind, RequestRecord
from loadgen.scenario import VerdictConfig
from loadgen.taxonomy import Verdict, by_severity

_ASCII_SPECIAL = re.compile(r"<\|[A-Za-z0-9_▁:.\-]{1,48}\|>")
_FULLWIDTH_SPECIAL = re.compile(r"<｜[^｜\n]{1,48}｜")
_THINK_TAG = re.compile(r"</?think>")
_TOOL_MARKUP = re.compile(r"</?tool_calls?>|</?function_calls?>|<｜DSML｜|<\|tool_call")


@dataclass(frozen=True, slots=True)
class Loop:
    """Where a loop was found, for the report's forensics."""

    field: str
    kind: str  # "period" or "ngram"
    unit: str
    repeats: int


_INFRA_VERDICT: dict[ErrorKind, Verdict] = {
    ErrorKind.INTERRUPTED: Verdict.INTERRUPTED,
    ErrorKind.TIMEOUT: Verdict.TIMEOUT,
    ErrorKind.STREAM: Verdict.STREAM_ERROR,
    ErrorKind.BROKEN: Verdict.STREAM_ERROR,
    ErrorKind.HTTP: Verdict.HTTP_ERROR,
    ErrorKind.CONNECT: Verdict.HTTP_ERROR,
    ErrorKind.TRANSPORT: Verdict.HTTP_ERROR,
}


def infra_verdict(record: RequestRecord) -> Verdict | None:
    """The transport-level failure of a record, if any (by its error kind)."""
    if record.error_kind is None:
        return None
    return _INFRA_VERDICT[record.error_kind]


def tail_period_loop(
    text: str, min_period: int, max_period: int, min_repeats: int, min_chars: int
) -> tuple[str, int] | None:
    """Shortest unit that the text's tail repeats, as (unit, repeats), or None.

    Candidates come from earlier occurrences of the last `min_period` characters (found
    with str.rfind, i.e. C speed), so a healthy text costs a few scans, not a
    quadratic search.
    """
    n = len(text)
    if n < max(min_chars, min_period * min_repeats):
        return None
    probe = text[n - min_period:]
    lo = max(0, n - min_period - max_period)
    hi = n - 1
    while True:
        i = text.rfind(probe, lo, hi)
        if i < 0:
            return None
        period = n - min_period - i
        hi = i + min_period - 1
        if period < min_period:
            continue
        unit = text[n - period:]
        start = n - period
        repeats = 1
        while start - period >= 0 and text[start - period:start] == unit:
            start -= period
            repeats += 1
        if repeats >= min_repeats and repeats * period >= min_chars:
            return unit, repeats


def ngram_loop(text: str, n: int, min_repeats: int, tail_words: int) -> tuple[str, int] | None:
    """The most repeated word n-gram in the tail, if it repeats at least min_repeats."""
    words = text.split()
    if len(words) < n * min_repeats:
        return None
    words = words[-tail_words:]
    counts = Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    gram, repeats = counts.most_common(1)[0]
    if repeats >= min_repeats:
        return " ".join(gram), repeats
    return None


def find_loop(record: RequestRecord, cfg: VerdictConfig) -> Loop | None:
    for field in ("reasoning", "content"):
        text = getattr(record, field)
        if not text:
            continue
        hit = tail_period_loop(
            text, cfg.loop_min_period_chars, cfg.loop_max_period_chars,
            cfg.loop_min_repeats, cfg.loop_min_chars,
        )
        if hit:
            return Loop(field, "period", hit[0], hit[1])
        hit = ngram_loop(text, cfg.ngram_words, cfg.ngram_min_repeats, cfg.ngram_tail_words)
        if hit:
            return Loop(field, "ngram", hit[0], hit[1])
    return None


def find_leak(record: RequestRecord, cfg: VerdictConfig) -> str | None:
    """The first leaked token or tag, as the report shows it, or None."""
    content = record.content
    if content:
        for pattern in (_ASCII_SPECIAL, _FULLWIDTH_SPECIAL, _THINK_TAG, _TOOL_MARKUP):
            m = pattern.search(content)
            if m:
                return f"content: {m.group(0)!r}"
    reasoning = record.reasoning
    if reasoning:
        for pattern in (_ASCII_SPECIAL, _FULLWIDTH_SPECIAL, _THINK_TAG):
            m = pattern.search(reasoning)
            if m:
                return f"reasoning: {m.group(0)!r}"
    for token in cfg.special_tokens:
        if token and (token in content or token in reasoning):
            return f"special token {token!r}"
    return None


def classify(record: RequestRecord, cfg: VerdictConfig) -> list[str]:
    """All verdicts of one record, most severe first; ['ok'] when clean."""
    infra = infra_verdict(record)
    if infra is not None:
        return [infra.value]
    found: set[Verdict] = set()
    has_answer = bool(record.content.strip()) or bool(record.tool_calls)
    if record.finish_reason == "length":
        if has_answer:
            found.add(Verdict.TRUNCATED)
        elif record.reasoning.strip():
            found.add(Verdict.STUCK_IN_REASONING)
        else:
            found.add(Verdict.EMPTY_CONTENT)
    elif not has_answer:
        found.add(Verdict.EMPTY_CONTENT)
    if find_loop(record, cfg) is not None:
        found.add(Verdict.REASONING_LOOP)
    if find_leak(record, cfg) is not None:
        found.add(Verdict.TOKEN_LEAK)
    if not found:
        return [Verdict.OK.value]
    return [v.value for v in by_severity(found)]
