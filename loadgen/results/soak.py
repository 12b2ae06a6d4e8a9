"""soak.json: a finished soak's account (its rounds, its history, why it stopped).

`report` reads it only to point a person who named a soak's folder at the right
command (`report ROUND`, `history DB`); the model keeps every key as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from loadgen.results.schema import read_file

SOAK_FILE = "soak.json"


class SoakFile(BaseModel):
    """soak.json; a soak still running (or killed) has none, and reads as empty."""

    model_config = ConfigDict(extra="allow")

    soak_id: str | None = None
    scenario: str | None = None
    history: str | None = None  # the history database it wrote to
    status: str | None = None
    stopped: str | None = None
    exit_code: int | None = None
    plan: dict[str, Any] = Field(default_factory=dict)
    rounds: list[dict[str, Any]] = Field(default_factory=list)


def read_soak(folder: Path) -> SoakFile:
    return read_file(folder / SOAK_FILE, SoakFile)
