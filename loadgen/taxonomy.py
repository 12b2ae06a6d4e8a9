"""The failure taxonomy: verdict names and their severity order (most severe first)."""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum


class Verdict(StrEnum):
    """One classification of one reply (or, for `divergent`, of a group of replies).

    The string values are public: records.jsonl, summary.json, junit.xml and scenario
    gates all use them. The members are declared most severe first, and that order is
    the one order of the verdicts (`SEVERITY`): a record's verdict list is sorted by it,
    and its first entry is the one a one-line summary shows.
    """

    CROSS_TALK = "cross_talk"
    STUCK_IN_REASONING = "stuck_in_reasoning"
    GARBLED = "garbled"
    WRONG_ANSWER = "wrong_answer"
    STALE_ANSWER = "stale_answer"
    WRONG_LANGUAGE = "wrong_language"
    EMPTY_CONTENT = "empty_content"
    NO_TOOL_CALL = "no_tool_call"
    TOOL_ARGS_LOOP = "tool_args_loop"
    BAD_TOOL_CALL = "bad_tool_call"
    REASONING_LOOP = "reasoning_loop"
    REFERENCE_MISMATCH = "reference_mismatch"
    ABNORMAL_FINISH = "abnormal_finish"
    TRUNCATED = "truncated"
    UNFINISHED = "unfinished"
    TOKEN_LEAK = "token_leak"
    DISORDERED_STREAM = "disordered_stream"
    USAGE_MISMATCH = "usage_mismatch"
    DIVERGENT = "divergent"
    STREAM_ERROR = "stream_error"
    TIMEOUT = "timeout"
    HTTP_ERROR = "http_error"
    INTERRUPTED = "interrupted"
    OK = "ok"


#: Most severe first: the enum's own order, so a new verdict has its place where it is
#: declared and cannot be missing from the order.
SEVERITY: tuple[Verdict, ...] = tuple(Verdict)
_RANK = {v: i for i, v in enumerate(SEVERITY)}

# Failures of the path to the model rather than of the model's output: they count
# against the gate's infrastructure limit, never as a reproduction of the bug.
INFRA_VERDICTS: frozenset[Verdict] = frozenset(
    {Verdict.HTTP_ERROR, Verdict.TIMEOUT, Verdict.STREAM_ERROR}
)
_INFRA_NAMES = frozenset(v.value for v in INFRA_VERDICTS)


def counts_as_infra_error(verdicts: Collection[str]) -> bool:
    """Whether a record counts against gate.max_infra_errors: one place, so that the
    engine stops a phase at the very count at which the gate would call the run invalid
    (an interrupted request never finished: it counts neither way)."""
    return Verdict.INTERRUPTED.value not in verdicts and not _INFRA_NAMES.isdisjoint(verdicts)


#: Signals, not failures: a scenario gates them only by naming them in `gate.fail_on`.
#: `divergent`: vLLM is not batch-invariant (unless VLLM_BATCH_INVARIANT=1), so identical
#: greedy requests may legitimately differ under concurrency.
OPT_IN: frozenset[Verdict] = frozenset({Verdict.DIVERGENT})
#: Not a judgement of what the model wrote: the reply never came (counted against
#: `gate.max_infra_errors`), was interrupted, or is clean.
_NOT_OUTPUT_FAILURES = frozenset({*INFRA_VERDICTS, Verdict.INTERRUPTED, Verdict.OK})

# What a gate fails on unless the scenario says otherwise: every verdict that makes a
# reply useless or wrong, i.e. every verdict but the opt-in signals and the infrastructure
# ones. The set is derived from the enum, so a verdict added later gates by default: a
# scenario written before it existed cannot ignore it silently (it must name it in
# `gate.ignore`). `truncated` is the client's max_tokens cutting an answer; where a
# scenario's cap is meant to cut, it says so in `gate.ignore`.
DEFAULT_FAIL_ON: tuple[Verdict, ...] = tuple(
    v for v in Verdict if v not in OPT_IN and v not in _NOT_OUTPUT_FAILURES)
#: The verdicts `gate.ignore` may name (what else is there is no failure to accept).
FAILURE_VERDICTS: frozenset[Verdict] = frozenset(DEFAULT_FAIL_ON)

#: Verdicts about a reply judged against the run's other replies (computed after the
#: run over all records by `judge.run_level`, stored beside records.jsonl), not about
#: one reply alone.
RUN_LEVEL: frozenset[Verdict] = frozenset(
    {Verdict.DIVERGENT, Verdict.CROSS_TALK, Verdict.REFERENCE_MISMATCH})


def by_severity(verdicts: set[Verdict] | list[Verdict]) -> list[Verdict]:
    """Order verdicts most severe first, without duplicates."""
    return sorted(set(verdicts), key=_RANK.__getitem__)
