"""`token_leak`: special tokens and markup that reached the visible text.

Special tokens (`<|...|>`, `<｜...｜`, BOS/EOS), think tags or tool-call markup in the
content; special tokens or think tags inside the reasoning (a parser that failed to
split, or BOS bursts from NaN logits); any token the scenario names.
"""

from __future__ import annotations

import re

from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

_ASCII_SPECIAL = re.compile(r"<\|[A-Za-z0-9_▁:.\-]{1,48}\|>")
_FULLWIDTH_SPECIAL = re.compile(r"<｜[^｜\n]{1,48}｜")
_THINK_TAG = re.compile(r"</?think>")
_TOOL_MARKUP = re.compile(r"</?tool_calls?>|</?function_calls?>|<｜DSML｜|<\|tool_call")


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


