"""run_level.jsonl: what the run-level rules changed, one line per record they revised.

records.jsonl is append-only and keeps each reply's own verdicts, so what the judge
derives across the run goes beside it (`judge.run_level` says how it is derived). The
file is derived and rebuilt whole by `dsv4-qual report DIR`, so its lines are not
stamped: a reader of an older one reads what is there, and a line it cannot use (torn,
no integer `seq`, a field of another shape) is skipped rather than half-read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from loadgen.files import atomic_writer

RUN_LEVEL_FILE = "run_level.jsonl"


class RunLevelLine(BaseModel):
    """One line: a record's final verdicts (what every report counts), the run-level
    names added, the per-reply names they explain away, and the rules' findings.
    Written in this order; a key an older writer left out reads as its default."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    seq: StrictInt  # a seq written as text is another writer's line, not this record's
    phase: str = ""
    item_id: str = ""
    verdicts: list[str] = Field(default_factory=list)
    run_level: list[str] = Field(default_factory=list)
    replaced: list[str] = Field(default_factory=list)
    findings: dict[str, Any] = Field(default_factory=dict)


def write_run_level(path: Path, changed: list[RunLevelLine]) -> None:
    """run_level.jsonl, replaced whole (an empty file says no record was changed)."""
    with atomic_writer(path) as out:
        for line in sorted(changed, key=lambda c: c.seq):
            out.write(orjson.dumps(line.model_dump()) + b"\n")


def read_run_level(path: Path) -> dict[int, RunLevelLine]:
    """seq -> its run_level.jsonl line; {} when the file is missing."""
    if not path.exists():
        return {}
    out: dict[int, RunLevelLine] = {}
    for raw in path.read_bytes().splitlines():
        try:
            line = RunLevelLine.model_validate_json(raw)
        except ValidationError:
            continue
        out[line.seq] = line
    return out
