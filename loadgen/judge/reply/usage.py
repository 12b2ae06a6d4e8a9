"""`usage_mismatch`: the server's own token count against what it streamed and allowed.

A reply's `usage.completion_tokens` is the server's account of what it generated (what
a billing system charges, what a capacity plan counts). Two things bound it, whatever
the model and the tokenizer:

- every delta that carried text, reasoning or a call carried at least one new token
  (a step of the engine yields one delta a choice at most, and a token that decodes to
  nothing yields none), so the count is at least the token-bearing deltas received
  (the stated tolerance: zero; a server that packs several tokens into a delta only
  makes the count larger);
- the request's `max_tokens` (or `max_completion_tokens`) for each of the choices it
  asked for (`n`; the count covers them all): a server that says it generated more
  than it was allowed either ignored the limit or miscounts;
- `reasoning_tokens` is a part of the completion, never more than all of it, and, like
  the whole count, at least the deltas that carried reasoning, give or take
  `REASONING_SLACK` (a reasoning parser may release text it held back, the start of a
  marker that was none, in the delta that ends the reasoning, whose own token is the
  marker). A stream that carries more reasoning deltas than the server says it
  generated reasoning tokens carries someone else's: another request's deltas spliced
  in (its own tokens are what the server counts for a request). A count of 0 says
  nothing: vLLM's reasoning parsers that keep no count report 0.

A count outside these is impossible for an honest server: its accounting is broken (a
counter stuck at zero, another request's count, a stale one), a failure of the server
even when the text is right. A reply that did not complete (an error, no finish) is
not judged: its count was never final. A server that reports no usage says nothing
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadgen.judge.reply.family import Family, Found
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict

#: Reasoning deltas a stream may carry beyond its reasoning tokens (see the module doc).
REASONING_SLACK = 1


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_problem(record: RequestRecord) -> str | None:
    """What is impossible about the reply's usage, in one sentence, or None."""
    if record.error is not None or record.status != 200 or not record.finish_reason:
        return None
    completion = _count(record.usage.completion_tokens)
    if completion is None:
        return None
    params = record.params or {}
    limit = _count(params.get("max_tokens"))
    choices = _count(params.get("n")) or 1
    if limit is not None and completion > limit * max(choices, 1):
        asked = f"max_tokens {limit}" + (f" for each of its {choices} choices"
                                         if choices > 1 else "")
        return f"usage says {completion} completion tokens, more than the request's {asked}"
    streamed = record.timings.chunks if (record.params or {}).get("stream", True) else 0
    if completion < streamed:
        return (f"usage says {completion} completion tokens, fewer than the {streamed} "
                "token-bearing deltas streamed (each carries at least one token)")
    reasoning = _count(record.usage.reasoning_tokens)
    if reasoning is not None and reasoning > completion:
        return (f"usage says {reasoning} reasoning tokens, more than its {completion} "
                "completion tokens")
    thought = record.timings.reasoning_chunks if streamed else 0
    if reasoning and thought > reasoning + REASONING_SLACK:
        return (f"usage says {reasoning} reasoning tokens, fewer than the {thought} "
                "reasoning deltas streamed (each carries at least one)")
    return None


def _check(record: RequestRecord, cfg: object) -> Found | None:
    usage = usage_problem(record)
    return None if usage is None else Found(frozenset({Verdict.USAGE_MISMATCH}),
                                            {"usage": usage})


def _describe(found: Mapping[str, Any]) -> list[str]:
    return [f"usage: {found['usage']}"] if found["usage"] else []


FAMILY = Family(name="usage", verdicts=frozenset({Verdict.USAGE_MISMATCH}),
                findings={"usage": str | None}, describe=_describe, check=_check)
