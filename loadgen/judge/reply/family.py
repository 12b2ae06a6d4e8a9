"""A rule family, declared in one place: the verdicts it gives, the knobs it reads, the
findings it writes and the report's sentence for each.

A family module ends with its `FAMILY`; `judge.reply` registers the families of one
reply (and composes their knobs into the scenario's `[verdicts]` section), and
`judge.findings` registers them with the run-level ones and reads a record's findings
back through the types the families declare. Adding a family is its module, its tests
and its line in the register; its verdicts' names and their place in the severity
order are the public list of `taxonomy.Verdict`, which the family names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Self, get_origin

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, model_validator

from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict

#: (lower, upper, strictly below) pairs of knobs, one knob group's own.
Ordered = tuple[tuple[str, str, bool], ...]


class Knobs(BaseModel):
    """A family's thresholds, one group of the scenario's flat `[verdicts]` section.

    Unknown keys are errors (a misspelt key silently ignored would change a verdict).
    Knobs that bound others name their pairs (`ORDERED`); one validator holds them all,
    so a group cannot forget to check its own."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    ORDERED: ClassVar[Ordered] = ()

    @model_validator(mode="after")
    def _in_order(self) -> Self:
        for group in type(self).__mro__:
            for lower, upper, strictly in vars(group).get("ORDERED", ()):
                low, high = getattr(self, lower), getattr(self, upper)
                if low >= high if strictly else low > high:
                    raise ValueError(f"{lower} must {'be below' if strictly else 'not exceed'}"
                                     f" {upper}")
        return self


class Finding(BaseModel):
    """A finding as records.jsonl holds it: read tolerantly (keys another writer added
    are ignored), never changed once read."""

    model_config = ConfigDict(extra="ignore", frozen=True)


@dataclass(frozen=True)
class Found:
    """What one family found in one reply: its verdicts, and its findings as written
    (JSON values, under the keys the family declares)."""

    verdicts: frozenset[Verdict] = frozenset()
    findings: dict[str, Any] = field(default_factory=dict)


#: A family's check of one reply; the config is the scenario's `[verdicts]`, of which the
#: family reads its own knobs (and, where it builds on another family, that one's).
Check = Callable[[RequestRecord, Any], Found | None]
#: The report's lines for a family's findings, each read back through its declared type.
Describe = Callable[[Mapping[str, Any]], list[str]]


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def empty(kind: Any) -> Any:
    """What a record without the finding holds: an empty list for a list, else None."""
    return [] if get_origin(kind) is list else None


@dataclass(frozen=True)
class Family:
    """One rule family. `findings` maps each key it writes to the type it is read back
    as (`list[...]` for several, `X | None` for at most one); `check` is None for a
    run-level family, whose rule observes the whole run (`judge.run_level.Rule`)."""

    name: str
    verdicts: frozenset[Verdict]
    findings: Mapping[str, Any]
    describe: Describe
    check: Check | None = None
    knobs: type[Knobs] | None = None

    def read(self, data: Any, key: str) -> Any:
        """One of this family's findings from a record's findings as written: its type's
        empty value where it is absent or of another shape."""
        kind = self.findings[key]
        if not isinstance(data, Mapping) or key not in data:
            return empty(kind)
        try:
            return _adapter(kind).validate_python(data[key])
        except ValidationError:
            return empty(kind)
