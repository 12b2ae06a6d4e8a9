"""`divergent`: identical greedy requests must get the same visible answer.

A reply that disagrees with the majority of its identical twins (same body hash, greedy
sampling) is divergent. vLLM is not batch-invariant unless VLLM_BATCH_INVARIANT=1, so
this is a forensic signal that scenarios opt into gating, not a default failure.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from loadgen.judge.reply.family import Family
from loadgen.judge.run_level import Revision, completed
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict


def _called(call: dict[str, Any]) -> tuple[Any, Any]:
    """A call's name and arguments (none where its `function` is not an object)."""
    fn = call.get("function")
    return (fn.get("name"), fn.get("arguments")) if isinstance(fn, dict) else (None, None)


def answer_key(record: RequestRecord) -> bytes:
    """What two greedy replies to the same body must agree on: the visible answer."""
    calls = [_called(c) for c in record.tool_calls or [] if isinstance(c, dict)]
    digest = hashlib.blake2b(orjson.dumps([record.finish_reason, record.content or "",
                                           calls]),
                             digest_size=16)
    return digest.digest()


def greedy_entry(record: RequestRecord, own: list[str]) -> tuple[str, int, bytes] | None:
    """(body hash, seq, answer key) of a completed greedy request, else None."""
    if not (record.greedy and record.body_hash) or not completed(own):
        return None
    return str(record.body_hash), int(record.seq), answer_key(record)


def divergent_seqs(entries: Iterable[tuple[str, int, bytes]]) -> set[int]:
    """Seqs of greedy replies that disagree with the majority of their identical bodies."""
    groups: dict[str, list[tuple[int, bytes]]] = {}
    for body_hash, seq, key in entries:
        groups.setdefault(body_hash, []).append((seq, key))
    out: set[int] = set()
    for members in groups.values():
        if len(members) < 2:
            continue
        majority, _ = Counter(k for _, k in members).most_common(1)[0]
        out.update(seq for seq, k in members if k != majority)
    return out


class Divergent:
    """The rule: greedy twins of the loaded phases (priming and measurement)."""

    name = "divergent"

    PHASES = frozenset({"priming", "measurement"})

    def __init__(self) -> None:
        self._entries: list[tuple[str, int, bytes]] = []

    def observe(self, record: RequestRecord, own: list[str]) -> None:
        # A line without a phase is read as a measured one (`RequestRecord.read`).
        if record.phase not in self.PHASES:
            return
        entry = greedy_entry(record, own)
        if entry is not None:
            self._entries.append(entry)

    def revisions(self) -> dict[int, Revision]:
        return {seq: Revision(add={Verdict.DIVERGENT})
                for seq in divergent_seqs(self._entries)}

    def summary(self) -> None:
        return None


def _describe(found: Mapping[str, Any]) -> list[str]:
    return []  # the reports count divergent replies (report.run_text.run_level_text)


#: An opt-in signal (`taxonomy.OPT_IN`); it writes no findings of a reply.
FAMILY = Family(name="divergent", verdicts=frozenset({Verdict.DIVERGENT}), findings={},
                describe=_describe)
