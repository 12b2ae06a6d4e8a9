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
  n-gram (8 words) seen >= 6 times in the last 400 words; in the content, also
  returned to through the same words (at most half the spans between its occurrences
  distinct: a templated list or table fills in a new value each time, a loop does
  not). A period of one token
  ("0000...") is caught too: it also repeats with any multiple of its length.
- token_leak: special tokens (`<|...|>`, `<｜...｜`, BOS/EOS), think tags or tool-call
  markup in the visible content; special tokens or think tags inside reasoning (a
  parser that failed to split, or BOS bursts from NaN logits).
- no_tool_call: a turn that expected a tool call (the record's `params`: the workload
  says so, or `tool_choice` is "required" or names a function) got none.
- bad_tool_call: a tool call whose name is empty or not among the tools offered, or
  whose arguments are not a JSON object or miss a key the tool's schema requires.
- tool_args_loop: a tool call's arguments end in a loop (the rules of reasoning_loop),
  or are cut by `length` before they close.
- abnormal_finish: a finish_reason other than stop, length or tool_calls (abort,
  error, repetition, anything unknown, or none at all).
- http_error / timeout / stream_error: the path to the model failed; no output rule
  is applied to such a record.
- divergent: run level (`judge.run_level`), never set on a single record here.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import orjson

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


def ngram_loop(text: str, n: int, min_repeats: int, tail_words: int,
               templates: bool = False) -> tuple[str, int] | None:
    """The most repeated word n-gram in the tail, if it repeats at least min_repeats.

    `templates`: the text may legitimately fill one template many times (an answer's
    list, table, code or JSON). What lies between consecutive occurrences then tells a
    loop from a template: a loop returns through the same few words, a template gets a
    new value each time (an account id, a row's numbers), so at most half of those
    in-between spans may be distinct. Reasoning is not held to that: a reasoning that
    keeps restating itself with a counter that grows is a loop.
    """
    words = text.split()
    if len(words) < n * min_repeats:
        return None
    words = words[-tail_words:]
    counts = Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    gram, repeats = counts.most_common(1)[0]
    if repeats < min_repeats:
        return None
    if not templates:
        return " ".join(gram), repeats
    starts = [i for i in range(len(words) - n + 1) if tuple(words[i:i + n]) == gram]
    spans = [tuple(words[a + n:b]) for a, b in itertools.pairwise(starts)]
    if len(set(spans)) > len(spans) // 2:
        return None
    return " ".join(gram), repeats


def text_loop(text: str, cfg: VerdictConfig, templates: bool) -> tuple[str, str, int] | None:
    """(kind, unit, repeats) when the text ends in a loop: a repeated period of
    characters, else a repeated word n-gram (`templates`: see `ngram_loop`)."""
    hit = tail_period_loop(text, cfg.loop_min_period_chars, cfg.loop_max_period_chars,
                           cfg.loop_min_repeats, cfg.loop_min_chars)
    if hit:
        return "period", hit[0], hit[1]
    hit = ngram_loop(text, cfg.ngram_words, cfg.ngram_min_repeats, cfg.ngram_tail_words,
                     templates=templates)
    if hit:
        return "ngram", hit[0], hit[1]
    return None


def find_loop(record: RequestRecord, cfg: VerdictConfig) -> Loop | None:
    for field in ("reasoning", "content"):
        text = getattr(record, field)
        if text:
            hit = text_loop(text, cfg, templates=field == "content")
            if hit:
                return Loop(field, *hit)
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


NORMAL_FINISHES = frozenset({"stop", "length", "tool_calls"})


def tool_call_problems(record: RequestRecord, cfg: VerdictConfig
                       ) -> tuple[set[Verdict], list[str]]:
    """The tool-turn verdicts of a record and, for the forensics, why each was given."""
    found: set[Verdict] = set()
    why: list[str] = []
    params = record.params
    offered = params.get("tools")  # name -> required keys; None: not known
    calls = record.tool_calls
    if params.get("expects_tool_call") and not calls:
        found.add(Verdict.NO_TOOL_CALL)
        why.append("a tool call was expected; the reply has none")
    cut = record.finish_reason == "length"
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = fn.get("name") or ""
        raw = fn.get("arguments") or ""
        loop = text_loop(raw, cfg, templates=True)  # a list of similar objects: a template
        if loop is not None:
            found.add(Verdict.TOOL_ARGS_LOOP)
            why.append(f"call {i} ({name or '?'}): arguments end in a loop of {loop[1]!r} "
                       f"x{loop[2]}")
        try:
            args = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            args = None
        if args is None and cut and i == len(calls) - 1:
            found.add(Verdict.TOOL_ARGS_LOOP)
            why.append(f"call {i} ({name or '?'}): arguments cut by length before they close")
            continue
        if not name:
            problem = "no function name"
        elif isinstance(offered, dict) and name not in offered:
            problem = f"function {name!r} was not offered ({', '.join(sorted(offered)) or 'none'})"
        elif not isinstance(args, dict):
            problem = f"arguments are not a JSON object: {raw[:120]!r}"
        else:
            required = (offered or {}).get(name) or []
            missing = [key for key in required if key not in args]
            problem = f"arguments miss required {', '.join(missing)}" if missing else ""
        if problem:
            found.add(Verdict.BAD_TOOL_CALL)
            why.append(f"call {i} ({name or '?'}): {problem}")
    return found, why


def classify(record: RequestRecord, cfg: VerdictConfig) -> list[str]:
    """All verdicts of one record, most severe first; ['ok'] when clean.

    What each rule found goes into `record.findings` (the loop's unit, the leaked token,
    the tool call's problem): the forensics a person needs to judge the verdict.
    """
    infra = infra_verdict(record)
    if infra is not None:
        return [infra.value]
    found: set[Verdict] = set()
    findings: dict[str, Any] = {}
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
    if record.finish_reason not in NORMAL_FINISHES:
        found.add(Verdict.ABNORMAL_FINISH)
        findings["finish"] = record.finish_reason or "none"
    loop = find_loop(record, cfg)
    if loop is not None:
        found.add(Verdict.REASONING_LOOP)
        findings["loop"] = asdict(loop)
    if Verdict.STUCK_IN_REASONING in found:
        # A reasoning that runs in circles and one that was merely long read the same
        # by their finish; the report tells them apart.
        findings["stuck"] = "looping" if loop is not None and loop.field == "reasoning" \
            else "long (no loop in the reasoning)"
    leak = find_leak(record, cfg)
    if leak is not None:
        found.add(Verdict.TOKEN_LEAK)
        findings["leak"] = leak
    tool_verdicts, tool_why = tool_call_problems(record, cfg)
    found |= tool_verdicts
    if tool_why:
        findings["tool_calls"] = tool_why
    record.findings = findings
    if not found:
        return [Verdict.OK.value]
    return [v.value for v in by_severity(found)]
