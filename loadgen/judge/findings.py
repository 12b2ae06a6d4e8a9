"""Why a reply was given its verdicts, read back: the `findings` of records.jsonl and
run_level.jsonl.

Each rule family declares the findings it writes, their types and their report lines
where it is declared (`judge.reply.family.Family`); the rules build those types and the
judge writes them (`model_dump(mode="json")`). Every reader in this project reads them
back here, through the same types, by attribute: one type on both sides, so a finding
renamed in a rule is a failed read in a test, not a line silently missing from a report.
Records are a public contract (read by other tools, attached to bug reports), so a field
is renamed only with the contract.

Reading is tolerant, as every reader of a results directory is: a finding another
writer (or an older release) shaped differently is left out, and the rest are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadgen.judge.reply import FAMILIES as REPLY_FAMILIES
from loadgen.judge.reply.family import Family, empty
from loadgen.judge.run_level import cross_talk, divergent, reference, tool_ids

#: Every family: those of one reply in the order they are applied, then the run-level
#: ones. Their order is the order of a reply's lines in the reports.
FAMILIES: tuple[Family, ...] = (
    *REPLY_FAMILIES, tool_ids.FAMILY, cross_talk.FAMILY, reference.FAMILY, divergent.FAMILY)
_KINDS: dict[str, Any] = {key: kind for f in FAMILIES for key, kind in f.findings.items()}
_OWNERS: dict[str, Family] = {key: f for f in FAMILIES for key in f.findings}


class Findings:
    """Every family's findings of one reply, each read through its declared type: an
    attribute per key (`findings.loop.unit`), None or an empty list where a family found
    nothing."""

    __slots__ = ("_found",)

    def __init__(self, found: Mapping[str, Any] | None = None) -> None:
        given = found or {}
        self._found = {key: given.get(key, empty(kind)) for key, kind in _KINDS.items()}

    @classmethod
    def read(cls, data: Any) -> Findings:
        """A record's findings as written; a finding of another shape is left out."""
        return cls({key: owner.read(data, key) for key, owner in _OWNERS.items()})

    def __getattr__(self, key: str) -> Any:
        try:
            return self._found[key]
        except KeyError:
            raise AttributeError(key) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Findings) and self._found == other._found

    __hash__ = None  # type: ignore[assignment]  # mutable contents, like a dict

    def __repr__(self) -> str:
        found = {k: v for k, v in self._found.items() if v}
        return f"Findings({found!r})"


def findings_lines(findings: Findings) -> list[str]:
    """Why the verdicts were given, one line each, as each family words it (stuck looping
    or merely long, ...)."""
    return [line for family in FAMILIES for line in family.describe(findings._found)]
