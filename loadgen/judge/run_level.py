"""Verdicts about a group of replies, not one: `divergent`.

Identical greedy requests must get the same visible answer; a reply that disagrees
with the majority of its identical twins is `divergent`. vLLM is not
batch-invariant unless VLLM_BATCH_INVARIANT=1, so this is a forensic signal that
scenarios opt into gating. It is computed after the run, over every record, and
written back into each divergent record's own verdict list.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import orjson

from loadgen.records import RequestRecord
from loadgen.results import atomic_writer
from loadgen.taxonomy import INFRA_VERDICTS, Verdict, by_severity

DIVERGENT = Verdict.DIVERGENT.value
NOT_COMPLETED = frozenset(v.value for v in (*INFRA_VERDICTS, Verdict.INTERRUPTED))


def answer_key(record: RequestRecord) -> bytes:
    """What two greedy replies to the same body must agree on: the visible answer."""
    calls = [(c.get("function", {}).get("name"), c.get("function", {}).get("arguments"))
             for c in record.tool_calls]
    digest = hashlib.blake2b(orjson.dumps([record.finish_reason, record.content, calls]),
                             digest_size=16)
    return digest.digest()


def greedy_entry(record: RequestRecord) -> tuple[str, int, bytes] | None:
    """(body hash, seq, answer key) of a completed greedy request, else None.

    Completed means its stored verdicts name no transport failure or interruption
    (records written by any version carry their verdicts)."""
    if not (record.greedy and record.body_hash):
        return None
    if NOT_COMPLETED.intersection(record.verdicts):
        return None
    return record.body_hash, record.seq, answer_key(record)


def divergent_seqs(entries: Iterable[tuple[str, int, bytes]]) -> set[int]:
    """Seqs of greedy replies that disagree with the majority of their identical bodies.

    Entries come from `greedy_entry`. vLLM is not batch-invariant unless
    VLLM_BATCH_INVARIANT=1, so this is a forensic signal that scenarios opt into
    gating, not a default failure.
    """
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


def mark_run_level_verdicts(path: Path, divergent: set[int]) -> None:
    """Write `divergent` into the verdicts of exactly the records of these seqs (and out
    of any other), so a reader of records.jsonl sees what the summary counts.

    The seqs come from the run's counting pass (`aggregate`'s `due_divergent`); the file
    is replaced whole and atomically, and a line that does not parse (a torn last line)
    is kept as it is.
    """
    with atomic_writer(path) as dst, open(path, "rb") as src:
        for line in src:
            dst.write(_remarked(line, divergent))


def _remarked(line: bytes, divergent: set[int]) -> bytes:
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    if not isinstance(data, dict):
        return line
    verdicts = [str(v) for v in data.get("verdicts") or []]
    should = int(data.get("seq", -1)) in divergent
    if should == (DIVERGENT in verdicts):
        return line
    names = {Verdict(v) for v in verdicts if v in Verdict._value2member_map_}
    names.discard(Verdict.OK)
    if should:
        names.add(Verdict.DIVERGENT)
    else:
        names.discard(Verdict.DIVERGENT)
    data["verdicts"] = [v.value for v in by_severity(names)] or [Verdict.OK.value]
    return orjson.dumps(data) + b"\n"
