"""A fleet database seen through a local copy: a round is never lost to the network.

A soak that writes to a PostgreSQL history shared by the fleet records every soak and
round first in a SQLite spool in its own `--out` (same schema), then copies the soak's
rows to the database. When the database is away (restarted, network down), the copy
fails, the soak says so on stderr, and goes on: each later write tries again, and the
first that gets through writes every round the database missed. A soak that ends with
the database still away says loudly which rounds are not in it; the next soak with the
same `--out` writes them. What the soak reads back (its round count, an unfinished
soak to resume) comes from the spool, which always has it.

Copies are whole soaks (the soak's row, its rounds, their verdict counts), written as
upserts in one transaction: copying twice changes nothing, and a copy cut short leaves
the database as it was.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadgen.exit_codes import BadInputError
from loadgen.history.db import redact, unavailable_errors
from loadgen.history.rows import RoundRow
from loadgen.history.store import History, Soak

SPOOL_FILE = "history-spool.sqlite"
_PENDING = "spool_pending"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class SpooledHistory:
    """The history calls a soak makes (as `History`), local first, then the database."""

    def __init__(self, target: str, spool: Path, *,
                 warn: Callable[[str], None] = _stderr) -> None:
        self.target = target
        self.spool = spool
        self.warn = warn
        self.down_since: float | None = None
        # Reachable at the start, or the soak does not start: a wrong URL or password
        # is bad input, found before any GPU hour is spent.
        self.remote: History | None = History(target)
        try:
            self.local = History(spool)
            with self.local.db.transaction() as db:
                db.execute(f"CREATE TABLE IF NOT EXISTS {_PENDING} (soak_id TEXT PRIMARY KEY)")
        except BaseException:
            self.remote.close()
            raise
        self.push()  # what an earlier soak in this --out could not write

    @property
    def path(self) -> str:
        return redact(self.target)

    # -- what the soak reads: the spool has every row of its own soaks ---------------

    def unfinished_soak(self, scenario: str, out_dir: str) -> Soak | None:
        return self.local.unfinished_soak(scenario, out_dir)

    def rounds(self, soak_id: str) -> list[RoundRow]:
        return self.local.rounds(soak_id)

    # -- what it writes: the spool, then the database ----------------------------------

    def add_soak(self, soak: Soak, tool_version: str) -> None:
        self.local.add_soak(soak, tool_version)
        self._changed(soak.soak_id)

    def update_soak(self, soak_id: str, **fields: Any) -> None:
        self.local.update_soak(soak_id, **fields)
        self._changed(soak_id)

    def start_round(self, soak_id: str, number: int, **kwargs: Any) -> None:
        self.local.start_round(soak_id, number, **kwargs)
        self._changed(soak_id)

    def finish_round(self, soak_id: str, number: int, **kwargs: Any) -> None:
        self.local.finish_round(soak_id, number, **kwargs)
        self._changed(soak_id)

    def _changed(self, soak_id: str) -> None:
        with self.local.db.transaction() as db:
            db.execute(f"INSERT INTO {_PENDING} (soak_id) VALUES (?) ON CONFLICT DO NOTHING",
                       (soak_id,))
        self.push()

    def pending(self) -> dict[str, int]:
        """Soak id -> rounds of it the database has not been given yet."""
        return {soak_id: len(self.local.rounds(soak_id)) for soak_id in self._pending_ids()}

    def _pending_ids(self) -> list[str]:
        return [str(r["soak_id"]) for r in self.local.db.query(f"SELECT soak_id FROM {_PENDING}")]

    def push(self) -> bool:
        """Copy every pending soak to the database; False (and a warning) if it is away."""
        pending = self._pending_ids()
        if not pending:
            return True
        written = 0
        import psycopg  # a dependency; imported here so SQLite-only runs never load it

        gone: tuple[type[BaseException], ...] = (*unavailable_errors(), psycopg.Error,
                                                 BadInputError)
        try:
            if self.remote is None:
                self.remote = History(self.target)
            for soak_id in pending:
                soak = self.local.soak_row(soak_id)
                rounds = self.local.rounds(soak_id)
                if soak is not None:
                    verdicts = [v for r in rounds
                                for v in self.local.all_verdicts(soak_id, int(r.round))]
                    self.remote.upsert(soak, rounds, verdicts)
                    written += len(rounds)
                with self.local.db.transaction() as db:
                    db.execute(f"DELETE FROM {_PENDING} WHERE soak_id = ?", (soak_id,))
        except gone as exc:
            self._went_away(exc)
            return False
        if self.down_since is not None:
            self.warn(f"dsv4-qual: history {self.path} is back after "
                      f"{time.time() - self.down_since:.0f} s: the rounds kept in "
                      f"{self.spool} are written to it")
            self.down_since = None
        return True

    def _went_away(self, exc: BaseException) -> None:
        if self.remote is not None:
            with contextlib.suppress(Exception):
                self.remote.close()
            self.remote = None
        if self.down_since is None:
            self.down_since = time.time()
            reason = redact(str(exc).strip().splitlines()[0] if str(exc).strip()
                            else type(exc).__name__)
            self.warn(f"dsv4-qual: WARNING: history {self.path} cannot be written "
                      f"({reason}): every round is kept in {self.spool} and written to "
                      "the database when it is back")

    def close(self) -> None:
        """A last copy; rounds still not in the database are named, loudly."""
        try:
            if not self.push():
                missing = self.pending()
                rounds = sum(missing.values())
                self.warn(
                    f"dsv4-qual: WARNING: history {self.path} is still away: {rounds} "
                    f"round(s) of soak {', '.join(missing)} are NOT in it. They are kept in "
                    f"{self.spool} (`dsv4-qual history {self.spool}` shows them) and the "
                    "next soak with this --out writes them to the database.")
        finally:
            self.local.close()
            if self.remote is not None:
                with contextlib.suppress(Exception):
                    self.remote.close()
