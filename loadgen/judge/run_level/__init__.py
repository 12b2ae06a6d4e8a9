"""Run-level verdicts: a reply judged against the run's other replies, one mechanism.

Some verdicts cannot be given when a reply completes, because they depend on the rest
of the run: `divergent` (identical greedy bodies that disagree), `cross_talk` (a reply
that carries another request's facts), `reference_mismatch` (a loaded reply that
disagrees with the same body's solo reply). Each is a `Rule`: it *observes* every
record once, in the counting pass over records.jsonl (`judge.gate.aggregate`), typed as
that pass reads it (`RequestRecord.read`: each line parsed once, a key the line lacks at
its default), and then says which records it revises and why (`Revision`: verdicts
added, per-reply verdicts it explains away, findings).

Storage. records.jsonl is a public contract and append-only: each line keeps the
verdicts its reply got when it completed, and is never rewritten. What the run-level
rules derive is written beside it, in `run_level.jsonl`: one line per record they
changed, with its seq, phase, item id, its **final** verdict list (the one every
report counts), the run-level names added, the per-reply names replaced, and the
findings. A reader takes a record's verdicts from `run_level.jsonl` when it has a line
for the seq, else from records.jsonl. The file is derived: `dsv4-qual report DIR`
rebuilds it from records.jsonl (deterministically) whenever it rebuilds the reports.
Its line is `results.run_level.RunLevelLine`, written and read there.

A run-level rule may import the rules of one reply (`judge.reply`) and the text helpers
(`judge.text`), never the gate (the layers drawn in `loadgen.judge`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from loadgen.records import RequestRecord
from loadgen.taxonomy import INFRA_VERDICTS, RUN_LEVEL, Verdict, by_severity

_RUN_LEVEL_NAMES = frozenset(v.value for v in RUN_LEVEL)
#: Records no output rule judges: the reply never came, so no run-level rule judges it.
NOT_COMPLETED = frozenset(v.value for v in (*INFRA_VERDICTS, Verdict.INTERRUPTED))


@dataclass
class Revision:
    """What the run-level rules say of one record."""

    add: set[Verdict] = field(default_factory=set)
    #: Per-reply verdicts a run-level one explains (a wrong account that is another
    #: request's is `cross_talk`, not `wrong_answer`).
    remove: set[Verdict] = field(default_factory=set)
    findings: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: Revision) -> None:
        self.add |= other.add
        self.remove |= other.remove
        self.findings.update(other.findings)

    def apply(self, own: Iterable[str]) -> list[str]:
        """The record's final verdicts, most severe first (['ok'] when none is left)."""
        names = {Verdict(v) for v in own if v in Verdict._value2member_map_}
        names.discard(Verdict.OK)
        names = (names - self.remove) | self.add
        return [v.value for v in by_severity(names)] or [Verdict.OK.value]


class Rule(Protocol):
    """One run-level verdict's rule. It sees each record once, in file order, and only
    in `revisions` the whole run: a rule that must know every record before it judges
    one (who owns which code) keeps, as it observes, what its judging needs, and
    judges there."""

    name: str

    def observe(self, record: RequestRecord, own: list[str]) -> None:
        """See one record (`RequestRecord.read` of its line) with its own verdicts."""
        ...

    def revisions(self) -> dict[int, Revision]:
        """After every record was seen: seq -> what this rule changes about it."""
        ...

    def summary(self) -> RuleSummary | None:
        """What the run's reports say about this rule beyond the records it revised."""
        ...


class RuleSummary(Protocol):
    """A rule's own figures, typed; summary.json holds `to_dict()`."""

    def to_dict(self) -> dict[str, Any]: ...


def own_verdicts(record: RequestRecord) -> list[str]:
    """A record's per-reply verdicts. Records written before run-level verdicts were
    stored apart may carry `divergent` in their own list: it is judged anew here."""
    verdicts = [str(v) for v in (record.verdicts or ["ok"])]
    kept = [v for v in verdicts if v not in _RUN_LEVEL_NAMES]
    return kept or [Verdict.OK.value]


def completed(own: list[str]) -> bool:
    """The reply came (the rules judge what a reply says, never a missing one)."""
    return not NOT_COMPLETED.intersection(own)


def combine(rules: Iterable[Rule]) -> dict[int, Revision]:
    """Every rule's revisions, merged per record."""
    out: dict[int, Revision] = {}
    for rule in rules:
        for seq, revision in rule.revisions().items():
            out.setdefault(seq, Revision()).merge(revision)
    return out
