"""Why a reply was given its verdicts, typed: the `findings` of records.jsonl.

The rules build these models and the judge writes them (`model_dump(mode="json")`);
every reader in this project reads them back through `Findings.read`, by attribute.
One type on both sides: a finding renamed in a rule is then a type error in the
renderer, not a line silently missing from a report. Records are a public contract
(read by other tools, attached to bug reports), so a field here is renamed only with
the contract.

Reading is tolerant, as every reader of a results directory is: a finding another
writer (or an older release) shaped differently is left out, and the rest are kept.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class _Finding(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class LoopFinding(_Finding):
    """Where a loop was found (`judge.reply.loops`), for the report's forensics."""

    field: str = ""
    kind: str = ""  # "period", "counted period", "ngram", or a loop by meaning's kind
    unit: str = ""
    repeats: int = 0


class GarbleFinding(_Finding):
    """Where salad was found and what was measured (`judge.reply.garbled`)."""

    field: str = ""  # "reasoning", "content", or "call 0 change_plan.reason"
    kind: str = ""  # the detector: markers, scripts, glued_fragments, spaced_letters, ...
    detail: str = ""  # what it measured against its threshold
    excerpt: str = ""  # the offending window, at most garbled.EXCERPT_CHARS characters


class WrongFinding(_Finding):
    """A verifiable field that disagrees with the request's own facts (`judge.reply.substance`)."""

    field: str = ""  # where: "call 0 change_plan.account_id", "calls", "content"
    fact: str = ""  # the fact it should state
    expected: str = ""
    got: str | None = None  # None: the reply does not state it at all
    #: The earlier turn's fact the reply gave instead (`stale_answer`), if that is what
    #: it did.
    stale_of: str | None = None


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
