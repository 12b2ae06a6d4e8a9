"""server.json: what the servers said during the run, and which patch receipts count.

Its values are the servers' own answers (/v1/models, /version, /metrics samples, the
receipts the patch wrote), kept as they came for forensics; the model types the shape
this tool gives them, and `targets.facts.ServerFacts` reads the figures out of it.
Keys beyond these (an older or newer writer's) are kept as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from loadgen.results.directory import SERVER_FILE
from loadgen.results.schema import given, read_file, write_file


class ServerFile(BaseModel):
    """server.json; a key a run never reached is absent, and reads as its default."""

    model_config = ConfigDict(extra="allow")

    #: Each endpoint's base URL -> what it answered (models, version, metrics looks).
    servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    samples: list[dict[str, Any]] = Field(default_factory=list)  # /metrics over time
    receipts_dir: str | None = None
    receipts_dir_state: str | None = None
    receipts: list[dict[str, Any]] = Field(default_factory=list)  # every one, marked
    receipts_selection: dict[str, Any] | None = None
    receipts_summary: dict[str, Any] | None = None
    c128a_layout: str | None = None
    c128a_layout_source: str | None = None

    def document(self) -> dict[str, Any]:
        """The file as written (only the keys it has), for the readers of its figures."""
        return given(self)


def write_server(out_dir: Path, document: dict[str, Any]) -> None:
    """server.json: what the servers said, their /metrics and the receipts selected."""
    write_file(out_dir / SERVER_FILE, ServerFile.model_validate(document))


def read_server(out_dir: Path) -> ServerFile:
    """server.json through its model; empty when the run never got there."""
    return read_file(out_dir / SERVER_FILE, ServerFile)


def load_server(out_dir: Path) -> dict[str, Any]:
    """server.json as written, validated, for `targets` to read its figures from."""
    return read_server(out_dir).document()
