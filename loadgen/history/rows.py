"""A round of the history as one typed row: what every reader of the history holds.

The database hands back rows as column -> value mappings. Read by string key, a
renamed or misspelt column is a silent None in a trend table or a fleet verdict; read
as a `RoundRow`, it is a type error where it is written, and a column the schema adds
without a field here fails the history's tests (`ROUND_COLUMNS` must all be fields).

Rows from an older database (version 1 has no facts of what a round ran on) take
None for what they lack: unknown, never guessed. A qualification read as a round
(`fleet DIR`) names its round by its folder and carries its one-line verdict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loadgen.history.schema import ROUND_COLUMNS


@dataclass(slots=True)
class RoundRow:
    """One row of `rounds` (schema.py says what each column holds), with the round's
    measured verdict counts where the reader asked for them."""

    soak_id: str
    round: int | str  # a qualification read as a round: its folder's name
    status: str
    started: float
    scenario: str | None = None
    results_dir: str = ""
    note: str | None = None
    ended: float | None = None
    run_id: str | None = None
    vllm_version: str | None = None
    c128a_layout: str | None = None
    server_start: float | None = None
    server_starts: str | None = None  # JSON: base URL -> the server's start time
    restart_detected: int = 0
    server_restarts: int | None = None
    priming: int = 0
    requests: int | None = None
    measured: int | None = None
    gated_failures: int | None = None
    allowed: int | None = None
    role: str | None = None
    upper_bound_95: float | None = None
    lower_bound_95: float | None = None
    exit_code: int | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    ttft_p99: float | None = None
    itl_p50: float | None = None
    itl_p99: float | None = None
    e2e_p50: float | None = None
    e2e_p99: float | None = None
    tokens_per_s: float | None = None
    host: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    gpu_driver: str | None = None
    image: str | None = None
    image_digest: str | None = None
    model: str | None = None
    model_revision: str | None = None
    scenario_hash: str | None = None
    #: The measurement phase's verdict -> records carrying it (`all_rounds` fills it).
    verdicts: dict[str, int] = field(default_factory=dict)
    #: A qualification's headline, where the round is one (`fleet DIR`).
    verdict_line: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RoundRow:
        """A database row (or a row a reader built): known columns kept, NULL for the rest."""
        return cls(**{name: row[name] for name in _FIELDS if name in row
                      and (row[name] is not None or name not in _NOT_NULL)})

    def columns(self) -> dict[str, Any]:
        """The row as the `rounds` table holds it (what a copy to another database writes)."""
        return {name: getattr(self, name) for name in ROUND_COLUMNS}

    def to_dict(self) -> dict[str, Any]:
        """Every field, for `history --json` and the fleet's JSON (a qualification's
        headline only where the round is one)."""
        doc = {name: getattr(self, name) for name in _FIELDS}
        if doc["verdict_line"] is None:
            del doc["verdict_line"]
        doc["verdicts"] = dict(self.verdicts)
        return doc


_FIELDS = tuple(f.name for f in dataclasses.fields(RoundRow))
#: Columns with a default that a NULL must not replace (an older writer's row).
_NOT_NULL = ("restart_detected", "priming", "results_dir", "verdicts")
