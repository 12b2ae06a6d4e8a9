"""The soak history: where soaks and their rounds are recorded, one schema for SQLite
and PostgreSQL (`store`, `schema`, `db`), what each round ran on (`identity`), the
local spool that keeps a fleet database's rounds while it is away (`spool`), and the
change points over the recorded failure rates (`changes`)."""

from __future__ import annotations

from loadgen.history.db import is_postgres, redact
from loadgen.history.rows import RoundRow
from loadgen.history.schema import SCHEMA_VERSION
from loadgen.history.store import (
    RESULT_COLUMNS,
    START_COLUMNS,
    History,
    Soak,
    round_results,
)

__all__ = ["RESULT_COLUMNS", "SCHEMA_VERSION", "START_COLUMNS", "History",
           "RoundRow", "Soak", "is_postgres", "redact", "round_results"]
