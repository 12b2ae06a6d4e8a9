"""RequestRecord -> verdicts: the failure taxonomy's per-reply rules, composed.

Rules (a record can carry several; `classify` orders them most severe first):

- stuck_in_reasoning: finish_reason `length`, no content, no tool calls, reasoning
  present. The #52448 signature: the model never left its reasoning channel. Content
  that shows nothing (whitespace, zero-width and other invisible characters:
  `judge.text.visible`) is no content.
- empty_content: the reply finished any other way (or by length with no text at all)
  with no content and no tool calls. Tool calls count as content.
- truncated: finish_reason `length` with some content or tool calls (the answer
  started but the cap cut it).
- reasoning_loop: reasoning or content ends in a loop (`judge.reply.loops`), unless the content
  repeats a sentence the request quoted as often as it asked (`judge.reply.asked`).
- token_leak: special tokens or markup in the visible text (`judge.reply.leaks`).
- disordered_stream: the reply's deltas in order are what no honest server streams: a
  run of deltas sent again right after itself, many deltas each sent twice, reasoning
  after the answer began, the reasoning's opening repeated in the content
  (`judge.reply.sequence`).
- usage_mismatch: the server's completion-token count is impossible against what it
  streamed and the request allowed (`judge.reply.usage`).
- garbled: token salad in the reasoning, the content or a tool call's argument values,
  however cleanly the reply finished (`judge.reply.garbled`).
- no_tool_call / bad_tool_call / tool_args_loop: tool turns (`judge.reply.tool_calls`).
- abnormal_finish: a finish_reason other than stop, length or tool_calls (abort,
  error, repetition, anything unknown, or none at all).
- wrong_answer: a verifiable field disagrees with the request's own facts, where the
  workload knows them (`judge.reply.substance`), a known answer is absent or beside a value
  that conflicts with it (`judge.reply.known_answers`).
- stale_answer: a turn of a conversation answered with an earlier turn's answer instead
  of its own (`judge.reply.known_answers`).
- wrong_language: the answer is fluent prose in a language the request neither wrote in
  nor named (`judge.reply.reply_language`).
- unfinished: an answer in prose that finished with `stop` in the middle of a sentence
  (`judge.reply.reply_language`); `truncated` is the same cut by `length`.
- http_error / timeout / stream_error: the path to the model failed; no output rule
  is applied to such a record.
- divergent, cross_talk, reference_mismatch: run level (`judge.run_level`), never set
  on a single record here.
"""

from __future__ import annotations

from typing import Any

from loadgen.judge.reply.asked import loop_was_asked
from loadgen.judge.reply.garbled import find_garble
from loadgen.judge.reply.leaks import find_leak
from loadgen.judge.reply.loops import find_loop
from loadgen.judge.reply.reply_language import find_unfinished, find_wrong_language
from loadgen.judge.reply.sequence import sequence_problems
from loadgen.judge.reply.substance import find_wrong
from loadgen.judge.reply.tool_calls import tool_call_problems
from loadgen.judge.reply.usage import usage_problem
from loadgen.judge.text.visible import is_blank
from loadgen.records import ErrorKind, RequestRecord
from loadgen.scenario import VerdictConfig
from loadgen.taxonomy import Verdict, by_severity

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


NORMAL_FINISHES = frozenset({"stop", "length", "tool_calls"})


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
    has_answer = not is_blank(record.content) or bool(record.tool_calls)
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
    if loop is not None and loop_was_asked(loop, record.params.get("asked_repetition")):
        # "write it ten times", done as asked
        findings["asked_repetition"] = loop.model_dump(mode="json")
        loop = None
    if loop is not None:
        found.add(Verdict.REASONING_LOOP)
        findings["loop"] = loop.model_dump(mode="json")
    if Verdict.STUCK_IN_REASONING in found:
        # A reasoning that runs in circles and one that was merely long read the same
        # by their finish; the report tells them apart.
        findings["stuck"] = "looping" if loop is not None and loop.field == "reasoning" \
            else "long (no loop in the reasoning)"
    leak = find_leak(record, cfg)
    if leak is not None:
        found.add(Verdict.TOKEN_LEAK)
        findings["leak"] = leak
    disorder = sequence_problems(record)
    if disorder:
        found.add(Verdict.DISORDERED_STREAM)
        findings["stream"] = disorder
    usage = usage_problem(record)
    if usage is not None:
        found.add(Verdict.USAGE_MISMATCH)
        findings["usage"] = usage
    garble = find_garble(record, cfg)
    if garble is not None:
        found.add(Verdict.GARBLED)
        findings["garbled"] = garble.model_dump(mode="json")
    tool_verdicts, tool_why = tool_call_problems(record, cfg)
    found |= tool_verdicts
    if tool_why:
        findings["tool_calls"] = tool_why
    wrong = find_wrong(record)
    stale = [w for w in wrong if w.stale_of is not None]
    wrong = [w for w in wrong if w.stale_of is None]
    if wrong:
        found.add(Verdict.WRONG_ANSWER)
        findings["wrong_answer"] = [w.model_dump(mode="json") for w in wrong]
    if stale:
        found.add(Verdict.STALE_ANSWER)
        findings["stale_answer"] = [w.model_dump(mode="json") for w in stale]
    other = find_wrong_language(record)
    if other is not None:
        found.add(Verdict.WRONG_LANGUAGE)
        findings["wrong_language"] = other.model_dump(mode="json")
    cut = find_unfinished(record)
    if cut is not None:
        found.add(Verdict.UNFINISHED)
        findings["unfinished"] = cut.model_dump(mode="json")
    record.findings = findings
    if not found:
        return [Verdict.OK.value]
    return [v.value for v in by_severity(found)]
