"""`cross_talk` by tool-call id: a call id that two requests' replies both carry.

A server makes each tool call's id up for that call (vLLM: `chatcmpl-tool-` and a random
hex; OpenAI: `call_` and 24 random characters; Mistral's: 9 random characters), and a
client answers the call by that id. A random id in the replies of two different
requests is one reply's call handed to another, or a generator that repeats itself:
either way a client that keys anything on the id mixes two conversations up.

Not every id is random: some parsers write the function's name and its position
(`functions.get_weather:0`), the same in every reply that calls it. An id counts only
where, the function's name taken out, it holds a random part (`judge.reply.tool_calls.
random_part`). Within one reply, two calls of one such id are `bad_tool_call`
(`judge.reply.tool_calls`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadgen.judge.reply.family import Family
from loadgen.judge.reply.tool_calls import random_part
from loadgen.judge.run_level import Revision, completed
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict


@dataclass(frozen=True, slots=True)
class SharedId:
    """A random tool-call id a reply shares with the replies to `others`. The finding is
    its sentence: findings' `tool_call_ids` is a list of these sentences
    (`FAMILY`), one per id, as report.md prints them."""

    call_id: str
    others: tuple[int, ...]  # the seqs of the other replies that carry it

    def sentence(self) -> str:
        seqs = ", ".join(str(s) for s in self.others)
        return f"tool-call id {self.call_id!r} is also in the reply to seq {seqs}"


class ToolCallIds:
    """The rule: which requests' replies carry each random tool-call id."""

    name = "tool_call_ids"

    def __init__(self) -> None:
        self._seen: dict[str, list[int]] = {}  # id -> the seqs whose replies carry it

    def observe(self, record: RequestRecord, own: list[str]) -> None:
        if not completed(own):
            return
        seq = int(record.seq)
        for call in record.tool_calls or []:  # the wire shape: each call an object
            if not isinstance(call, dict):
                continue
            call_id = call.get("id")
            fn = call.get("function")
            name = fn.get("name") if isinstance(fn, dict) else None
            if isinstance(call_id, str) and random_part(call_id, name or ""):
                seqs = self._seen.setdefault(call_id, [])
                if seq not in seqs:
                    seqs.append(seq)

    def revisions(self) -> dict[int, Revision]:
        out: dict[int, Revision] = {}
        for call_id, seqs in sorted(self._seen.items()):
            if len(seqs) < 2:
                continue
            for seq in seqs:
                shared = SharedId(call_id, tuple(s for s in seqs if s != seq))
                revision = out.setdefault(seq, Revision(add={Verdict.CROSS_TALK},
                                                        findings={"tool_call_ids": []}))
                revision.findings["tool_call_ids"].append(shared.sentence())
        return out

    def summary(self) -> None:
        return None


def _describe(found: Mapping[str, Any]) -> list[str]:
    return [f"cross-talk: {why}" for why in found["tool_call_ids"]]


#: `cross_talk` by tool-call id; its finding is the sentence itself.
FAMILY = Family(name="tool_ids", verdicts=frozenset({Verdict.CROSS_TALK}),
                findings={"tool_call_ids": list[str]}, describe=_describe)
