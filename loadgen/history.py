"""Soak history in SQLite: one row per soak, one per round, per-verdict counts.

Nightly soaks are worth their GPU hours only as a trend: is the failure rate of
this vLLM build the same as last week's, does it grow with uptime. Every round is
written here the moment it starts (status `running`) and again when it ends, so a
killed soak leaves a row that says so, and a restarted one continues its count.

Schema (version in `PRAGMA user_version`; a newer database is refused, never
rewritten):

  soaks          soak_id, scenario, out_dir, started, ended, status, duration_s,
                 rounds_target, stop_on_breach, exit_code, tool_version
  rounds         soak_id, round, status (running|complete|partial), note, started,
                 ended, scenario, results_dir, run_id, vllm_version, c128a_layout,
                 server_start, restart_detected, server_restarts, priming, requests,
                 measured, gated_failures, allowed, role, upper_bound_95,
                 lower_bound_95, exit_code, ttft_p50/p90/p99, itl_p50/p99,
                 e2e_p50/p99, tokens_per_s
  round_verdicts soak_id, round, phase, verdict, count  (records carrying the verdict)
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.exit_codes import BadInputError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS soaks (
    soak_id        TEXT PRIMARY KEY,
    scenario       TEXT NOT NULL,
    out_dir        TEXT NOT NULL,
    started        REAL NOT NULL,
    ended          REAL,
    status         TEXT NOT NULL,
    duration_s     REAL,
    rounds_target  INTEGER,
    stop_on_breach INTEGER NOT NULL DEFAULT 0,
    exit_code      INTEGER,
    tool_version   TEXT
);
CREATE INDEX IF NOT EXISTS soaks_by_target ON soaks (scenario, out_dir);
CREATE TABLE IF NOT EXISTS rounds (
    soak_id          TEXT NOT NULL REFERENCES soaks (soak_id),
    round            INTEGER NOT NULL,
    status           TEXT NOT NULL,
    note             TEXT,
    started          REAL NOT NULL,
    ended            REAL,
    scenario         TEXT NOT NULL,
    results_dir      TEXT NOT NULL,
    run_id           TEXT,
    vllm_version     TEXT,
    c128a_layout     TEXT,
    server_start     REAL,
    server_starts    TEXT,
    restart_detected INTEGER NOT NULL DEFAULT 0,
    server_restarts  INTEGER,
    priming          INTEGER NOT NULL DEFAULT 0,
    requests         INTEGER,
    measured         INTEGER,
    gated_failures   INTEGER,
    allowed          INTEGER,
    role             TEXT,
    upper_bound_95   REAL,
    lower_bound_95   REAL,
    exit_code        INTEGER,
    ttft_p50         REAL,
    ttft_p90         REAL,
    ttft_p99         REAL,
    itl_p50          REAL,
    itl_p99          REAL,
    e2e_p50          REAL,
    e2e_p99          REAL,
    tokens_per_s     REAL,
    PRIMARY KEY (soak_id, round)
);
CREATE INDEX IF NOT EXISTS rounds_by_start ON rounds (started);
CREATE TABLE IF NOT EXISTS round_verdicts (
    soak_id TEXT NOT NULL,
    round   INTEGER NOT NULL,
    phase   TEXT NOT NULL,
    verdict TEXT NOT NULL,
    count   INTEGER NOT NULL,
    PRIMARY KEY (soak_id, round, phase, verdict),
    FOREIGN KEY (soak_id, round) REFERENCES rounds (soak_id, round)
);
"""

# Round columns filled from a finished round's summary.json.
RESULT_COLUMNS = (
    "run_id", "vllm_version", "c128a_layout", "server_restarts", "requests", "measured",
    "gated_failures", "allowed", "role", "upper_bound_95", "lower_bound_95", "exit_code",
    "ttft_p50", "ttft_p90", "ttft_p99", "itl_p50", "itl_p99", "e2e_p50", "e2e_p99",
    "tokens_per_s",
)


@dataclass
class Soak:
    soak_id: str
    scenario: str
    out_dir: str
    started: float
    status: str
    duration_s: float | None
    rounds_target: int | None
    stop_on_breach: bool
    ended: float | None = None
    exit_code: int | None = None


class History:
    """An open history database. Short transactions: several soaks may share one file."""

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = path
        if not create and not path.is_file():
            raise BadInputError(f"{path}: no such history database")
        try:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
        except (sqlite3.DatabaseError, OSError) as exc:
            raise BadInputError(f"{path}: not a usable history database ({exc})") from None
        if version > SCHEMA_VERSION:
            self.db.close()
            raise BadInputError(
                f"{path}: history schema v{version} is newer than this dsv4-qual "
                f"(v{SCHEMA_VERSION}); upgrade dsv4-qual to write to it")
        if version == 0:
            if not create:
                tables = self.db.execute(
                    "SELECT count(*) FROM sqlite_master WHERE name = 'rounds'").fetchone()[0]
                if not tables:
                    self.db.close()
                    raise BadInputError(f"{path}: not a dsv4-qual history database")
            self.db.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}"
                                  f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        else:
            if self.db.in_transaction:
                self.db.execute("COMMIT")

    # -- soaks ----------------------------------------------------------------------

    def unfinished_soak(self, scenario: str, out_dir: str) -> Soak | None:
        """The soak a restarted command continues: same scenario, same out dir, not done."""
        row = self.db.execute(
            "SELECT * FROM soaks WHERE scenario = ? AND out_dir = ? "
            "AND status IN ('running', 'interrupted') ORDER BY started DESC LIMIT 1",
            (scenario, out_dir)).fetchone()
        return _soak(row) if row else None

    def add_soak(self, soak: Soak, tool_version: str) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO soaks (soak_id, scenario, out_dir, started, status, duration_s, "
                "rounds_target, stop_on_breach, tool_version) VALUES (?,?,?,?,?,?,?,?,?)",
                (soak.soak_id, soak.scenario, soak.out_dir, soak.started, soak.status,
                 soak.duration_s, soak.rounds_target, int(soak.stop_on_breach), tool_version))

    def update_soak(self, soak_id: str, **fields: Any) -> None:
        _check_columns(fields, {"status", "ended", "exit_code", "duration_s",
                                "rounds_target", "stop_on_breach"})
        with self.transaction() as db:
            db.execute(f"UPDATE soaks SET {', '.join(f'{k} = ?' for k in fields)} "
                       "WHERE soak_id = ?", (*fields.values(), soak_id))

    # -- rounds ---------------------------------------------------------------------

    def rounds(self, soak_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self.db.execute(
            "SELECT * FROM rounds WHERE soak_id = ? ORDER BY round", (soak_id,))]

    def start_round(self, soak_id: str, number: int, *, started: float, scenario: str,
                    results_dir: str, priming: int, restart_detected: bool,
                    server_starts: dict[str, float | None]) -> None:
        known = [s for s in server_starts.values() if s is not None]
        with self.transaction() as db:
            db.execute(
                "INSERT INTO rounds (soak_id, round, status, started, scenario, results_dir, "
                "priming, restart_detected, server_start, server_starts) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)",
                (soak_id, number, "running", started, scenario, results_dir, priming,
                 int(restart_detected), max(known) if known else None,
                 json.dumps(server_starts)))

    def finish_round(self, soak_id: str, number: int, *, status: str, note: str | None,
                     ended: float, results: dict[str, Any],
                     verdicts: dict[str, dict[str, int]]) -> None:
        """Record a round's outcome and its per-phase verdict counts, in one transaction."""
        _check_columns(results, set(RESULT_COLUMNS))
        fields = {"status": status, "note": note, "ended": ended, **results}
        with self.transaction() as db:
            db.execute(f"UPDATE rounds SET {', '.join(f'{k} = ?' for k in fields)} "
                       "WHERE soak_id = ? AND round = ?", (*fields.values(), soak_id, number))
            db.execute("DELETE FROM round_verdicts WHERE soak_id = ? AND round = ?",
                       (soak_id, number))
            db.executemany(
                "INSERT INTO round_verdicts (soak_id, round, phase, verdict, count) "
                "VALUES (?,?,?,?,?)",
                [(soak_id, number, phase, verdict, count)
                 for phase, counts in verdicts.items() for verdict, count in counts.items()])

    def verdict_counts(self, soak_id: str, number: int, phase: str = "measurement"
                       ) -> dict[str, int]:
        return {r["verdict"]: r["count"] for r in self.db.execute(
            "SELECT verdict, count FROM round_verdicts WHERE soak_id = ? AND round = ? "
            "AND phase = ?", (soak_id, number, phase))}

    def all_rounds(self, *, soak_id: str | None = None, scenario: str | None = None,
                   last: int | None = None) -> list[dict[str, Any]]:
        """Rounds oldest first, with their measured verdict counts (the trend's rows)."""
        where, args = [], []
        if soak_id:
            where.append("soak_id = ?")
            args.append(soak_id)
        if scenario:
            where.append("scenario = ?")
            args.append(scenario)
        sql = "SELECT * FROM rounds" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY started, soak_id, round"
        rows = [dict(r) for r in self.db.execute(sql, args)]
        if last:
            rows = rows[-last:]
        for row in rows:
            row["verdicts"] = self.verdict_counts(row["soak_id"], row["round"])
        return rows


def _soak(row: sqlite3.Row) -> Soak:
    return Soak(soak_id=row["soak_id"], scenario=row["scenario"], out_dir=row["out_dir"],
                started=row["started"], status=row["status"], duration_s=row["duration_s"],
                rounds_target=row["rounds_target"], stop_on_breach=bool(row["stop_on_breach"]),
                ended=row["ended"], exit_code=row["exit_code"])


def _check_columns(fields: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(fields) - allowed
    if unknown:  # column names go into SQL text: only our own names may
        raise ValueError(f"unknown history columns: {sorted(unknown)}")


def round_results(summary: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    """A round's summary.json -> (round columns, {phase: {verdict: records carrying it}})."""
    gate = summary.get("gate") or {}
    target = summary.get("target") or {}
    measurement = (summary.get("phases") or {}).get("measurement") or {}
    latency = measurement.get("latency_s") or {}

    def q(key: str, p: str) -> float | None:
        return (latency.get(key) or {}).get(p)

    versions = target.get("vllm_versions") or target.get("server_versions") or []
    results = {
        "run_id": summary.get("run_id"),
        "vllm_version": ",".join(versions) or None,
        "c128a_layout": target.get("c128a_layout"),
        "server_restarts": (summary.get("run") or {}).get("server_restarts"),
        "requests": sum(int(p.get("requests") or 0)
                        for p in (summary.get("phases") or {}).values()),
        "measured": gate.get("measured"),
        "gated_failures": gate.get("failures"),
        "allowed": gate.get("allowed"),
        "role": gate.get("role"),
        "upper_bound_95": gate.get("upper_bound_95"),
        "lower_bound_95": gate.get("lower_bound_95"),
        "exit_code": gate.get("exit_code"),
        "ttft_p50": q("ttft", "p50"), "ttft_p90": q("ttft", "p90"), "ttft_p99": q("ttft", "p99"),
        "itl_p50": q("inter_token", "p50"), "itl_p99": q("inter_token", "p99"),
        "e2e_p50": q("e2e", "p50"), "e2e_p99": q("e2e", "p99"),
        "tokens_per_s": measurement.get("tokens_per_s"),
    }
    verdicts = {phase: {str(k): int(v) for k, v in (p.get("verdicts") or {}).items()}
                for phase, p in (summary.get("phases") or {}).items()}
    return results, verdicts
