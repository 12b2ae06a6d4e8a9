"""summary.json: the machine-readable result of a run (a public contract).

Written from the typed run report (`report.summary` fills it); nothing in this tool
reads a figure back from it (the history and the fleet read the typed report or the
history), so the model types its sections, not each figure: a pipeline reading it is
the reader it is kept stable for. Unknown keys are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from loadgen.files import rounded
from loadgen.results.directory import SUMMARY_FILE
from loadgen.results.schema import given, read_file, stamped, write_file


class SummaryFile(BaseModel):
    """summary.json's sections, in the order it is written."""

    model_config = ConfigDict(extra="allow")

    scenario: str = ""
    run_id: str = ""
    run: dict[str, Any] = Field(default_factory=dict)  # run.json's `run`
    target: dict[str, Any] = Field(default_factory=dict)
    telemetry: dict[str, Any] = Field(default_factory=dict)
    phases: dict[str, dict[str, Any]] = Field(default_factory=dict)
    divergent_seqs: list[int] = Field(default_factory=list)
    run_level: dict[str, Any] = Field(default_factory=dict)
    reference: dict[str, Any] | None = None
    load: dict[str, Any] | None = None
    gate: dict[str, Any] = Field(default_factory=dict)
    client: dict[str, Any] = Field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """The file exactly as written: stamped, its figures rounded."""
        return rounded(stamped(given(self, mode="json")))


def write_summary(out_dir: Path, summary: SummaryFile) -> None:
    write_file(out_dir / SUMMARY_FILE, summary, round_floats=True)


def read_summary(out_dir: Path) -> SummaryFile:
    """summary.json through its model (for tools and tests; the reports never read it)."""
    return read_file(out_dir / SUMMARY_FILE, SummaryFile)
