"""One gated check: what junit.xml writes as one testcase, and the report as one line."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CheckKind(StrEnum):
    """What a failed check makes of the run (junit.xml's element for it)."""

    FAILURE = "failure"  # the gate failed: exit 1
    ERROR = "error"  # the run cannot be judged: invalid, exit 2


@dataclass
class Check:
    name: str
    passed: bool
    message: str
    kind: CheckKind = CheckKind.FAILURE  # read only when the check failed
    #: Passed only because it could not be made (what it needed was not there): junit.xml
    #: shows it skipped and the result line names it, so nobody reads it as proof.
    skipped: bool = False
