"""qualify.json: a qualification's verdict, its two sides whole, and the figures a
pipeline reads without opening a side.

`report.qualify_doc` builds it, `fleet DIR` reads every node's, `report DIR` reads the
command's own decisions back from it. Every key has a default and unknown keys are
kept: a qualify.json from before a key existed reads that key as unknown (the fleet
then falls back, as it did when it read the file by key), and one written with keys this
release does not know keeps them when it is read and written again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from loadgen.results.directory import QUALIFY_FILE
from loadgen.results.schema import read_file, validated, write_file

#: A figure as written: an int stays an int (a count), a float a float (a rate).
Number = int | float


class QualificationSide(BaseModel):
    """One side of a qualification (`control`, `candidate`): what the side-by-side pages
    show of its run; its whole account is its results directory (`results_dir`)."""

    model_config = ConfigDict(extra="allow")

    results_dir: str = ""
    role: str = ""
    exit_code: int | None = None
    passed: bool = False
    reasons: list[str] = Field(default_factory=list)
    base_urls: list[str] = Field(default_factory=list)
    c128a_layout: str | None = None
    layout: str | None = None
    vllm_versions: list[str] = Field(default_factory=list)
    vllm_release: str | None = None
    model: str | None = None
    receipts: int = 0
    fail_on: list[str] = Field(default_factory=list)
    allowed: int = 0
    measured: int | None = None
    failures: int | None = None
    failure_rate: Number | None = None
    upper_bound_95: Number | None = None
    lower_bound_95: Number | None = None
    no_rate: str | None = None
    verdicts: dict[str, int] = Field(default_factory=dict)
    finish_reasons: dict[str, int] = Field(default_factory=dict)
    latency_s: dict[str, Any] = Field(default_factory=dict)
    completion_tokens: dict[str, Any] | None = None
    spec_acceptance_rate: Number | None = None


class ModelsChecked(BaseModel):
    """qualify.json's `model`: did both sides serve the same model, and may they differ."""

    model_config = ConfigDict(extra="allow")

    same: bool = True
    allowed: bool = False
    differences: list[str] = Field(default_factory=list)
    control: dict[str, Any] = Field(default_factory=dict)
    candidate: dict[str, Any] | None = None


class QualificationFile(BaseModel):
    """qualify.json."""

    model_config = ConfigDict(extra="allow")

    command: str = ""
    scenario: str | None = None
    verdict: str | None = None
    exit_code: int | None = None
    passed: bool = False
    reasons: list[str] = Field(default_factory=list)
    statements: list[str] = Field(default_factory=list)
    model: ModelsChecked | None = None
    control: QualificationSide = Field(default_factory=QualificationSide)
    candidate: QualificationSide | None = None
    control_reproduction_rate: Number | None = None
    control_lower_bound_95: Number | None = None
    candidate_upper_bound_95: Number | None = None
    candidate_bound: str | None = None
    #: The two-sample test (`judge.difference.Difference.to_dict`), as written.
    difference: dict[str, Any] | None = None
    headline: str | None = None
    #: The node the load generator ran for, and when the qualification started and
    #: ended: what `fleet DIR` reads.
    node: str | None = None
    started: Number | None = None
    finished: Number | None = None


def write_qualification(out_dir: Path, document: QualificationFile) -> None:
    """qualify.json, stamped, its figures rounded for people to read."""
    write_file(out_dir / QUALIFY_FILE, document, round_floats=True)


def read_qualification(path: Path) -> QualificationFile:
    """A qualify.json through its model; missing or unreadable reads as empty, a newer
    schema or a shape the model refuses is bad input naming the file."""
    return read_file(path, QualificationFile)


def parse_qualification(path: Path) -> QualificationFile:
    """A qualify.json that must be there and whole (`fleet DIR` found it): one it cannot
    parse raises (OSError, ValueError, BadInputError), so the node fails by name instead
    of reading as a qualification that said nothing."""
    doc = orjson.loads(path.read_bytes())
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    return validated(path, doc, QualificationFile)
