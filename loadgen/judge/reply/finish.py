"""How a reply ended: `stuck_in_reasoning`, `empty_content`, `truncated`, `abnormal_finish`.

- stuck_in_reasoning: finish_reason `length`, no content, no tool calls, reasoning
  present. The #52448 signature: the model never left its reasoning channel. Content
  that shows nothing (whitespace, zero-width and other invisible characters:
  `judge.text.visible`) is no content.
- empty_content: the reply finished any other way (or by length with no text at all)
  with no content and no tool calls. Tool calls count as content.
- truncated: finish_reason `length` with some content or tool calls (the answer
  started but the cap cut it).
- abnormal_finish: a finish_reason other than stop, length or tool_calls (abort,
  error, repetition, anything unknown, or none at all).

Whether a stuck reply went round in circles or was merely long is the loop family's
finding (`loops`), which reads `is_stuck`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadgen.judge.reply.family import Family, Found
from loadgen.judge.text.visible import is_blank
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict

NORMAL_FINISHES = frozenset({"stop", "length", "tool_calls"})


def has_answer(record: RequestRecord) -> bool:
    """Visible content or a tool call: tool calls count as content."""
    return not is_blank(record.content) or bool(record.tool_calls)


def is_stuck(record: RequestRecord) -> bool:
    """Cut by length with no answer, after some reasoning."""
    return record.finish_reason == "length" and not has_answer(record) \
        and bool(record.reasoning.strip())


def _check(record: RequestRecord, cfg: object) -> Found | None:
    verdicts: set[Verdict] = set()
    findings: dict[str, Any] = {}
    answered = has_answer(record)
    if record.finish_reason == "length":
        if answered:
            verdicts.add(Verdict.TRUNCATED)
        elif record.reasoning.strip():
            verdicts.add(Verdict.STUCK_IN_REASONING)
        else:
            verdicts.add(Verdict.EMPTY_CONTENT)
    elif not answered:
        verdicts.add(Verdict.EMPTY_CONTENT)
    if record.finish_reason not in NORMAL_FINISHES:
        verdicts.add(Verdict.ABNORMAL_FINISH)
        findings["finish"] = record.finish_reason or "none"
    return Found(frozenset(verdicts), findings) if verdicts else None


def _describe(found: Mapping[str, Any]) -> list[str]:
    return [f"finish_reason: {found['finish']}"] if found["finish"] else []


FAMILY = Family(
    name="finish",
    verdicts=frozenset({Verdict.STUCK_IN_REASONING, Verdict.EMPTY_CONTENT, Verdict.TRUNCATED,
                        Verdict.ABNORMAL_FINISH}),
    findings={"finish": str | None}, describe=_describe, check=_check)
