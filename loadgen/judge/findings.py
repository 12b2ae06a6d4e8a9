"""Why a reply was given its verdicts, typed: the `findings` of records.jsonl read back.

The judge writes each rule family's finding into the record as plain JSON (records are
a public contract, read by other tools and attached to bug reports). Every reader in
this project reads them through `Findings.read`, by attribute: a finding renamed in the
judge is then a type error in the renderer, not a line silently missing from a report.

Reading is tolerant, as every reader of a results directory is: a finding another
writer (or an older release) shaped differently is left out, and the rest are kept.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class _Finding(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class LoopFinding(_Finding):
    """A repeated unit (judge.reply.loops.Loop)."""

    field: str = ""
    kind: str = ""
    unit: str = ""
    repeats: int = 0


class GarbleFinding(_Finding):
    """What a garble detector measured (judge.reply.garbled.Garble)."""

    field: str = ""
    kind: str = ""
    detail: str = ""
    excerpt: str = ""


class WrongFinding(_Finding):
    """A verifiable field that disagrees with the request's own facts (judge.reply.substance)."""

    field: str = ""
    fact: str = ""
    expected: str = ""
    got: str | None = None  # None: the reply does not state it at all
    stale_of: str | None = None  # the earlier turn's fact it gave instead


class LanguageFinding(_Finding):
    language: str = ""
    confidence: float = 0.0
    request_languages: list[str] = []


class UnfinishedFinding(_Finding):
    why: str = ""
    tail: str = ""


class CrossTalkSource(_Finding):
    """One foreign code in a reply, and the request it belongs to."""

    code: str = ""
    written: str | None = None
    part: bool = False
    where: list[str] = []
    source_item: str | None = None
    source_seq: int = -1
    in_flight_together: bool = False


class CrossTalkFinding(_Finding):
    sources: list[CrossTalkSource] = []


class ReferenceMismatch(_Finding):
    """How a loaded reply differs from its solo reply (the reference rule)."""

    reference_seq: int = -1
    field: str = ""
    loaded: str = ""
    reference: str = ""
    detail: str = ""


class Findings(_Finding):
    """Every rule family's finding of one reply; None (or empty) where it found nothing."""

    finish: str | None = None
    stuck: str | None = None
    loop: LoopFinding | None = None
    asked_repetition: LoopFinding | None = None
    leak: str | None = None
    usage: str | None = None
    stream: list[str] = []
    garbled: GarbleFinding | None = None
    tool_calls: list[str] = []
    wrong_answer: list[WrongFinding] = []
    stale_answer: list[WrongFinding] = []
    wrong_language: LanguageFinding | None = None
    unfinished: UnfinishedFinding | None = None
    cross_talk: CrossTalkFinding | None = None
    tool_call_ids: list[str] = []
    reference_mismatch: ReferenceMismatch | None = None

    @classmethod
    def read(cls, data: Any) -> Findings:
        """A record's findings as written; a finding of another shape is left out."""
        if not isinstance(data, dict):
            return cls()
        known = {k: v for k, v in data.items() if k in cls.model_fields}
        for _ in range(len(known) + 1):
            try:
                return cls.model_validate(known)
            except ValidationError as exc:
                bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
                known = {k: v for k, v in known.items() if k not in bad}
        return cls()
