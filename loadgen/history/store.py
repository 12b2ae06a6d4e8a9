"""The soak history: one row per soak, one per round, per-verdict counts.

Nightly soaks are worth their GPU hours only as a trend: is the failure rate of
this vLLM build the same as last week's, does it grow with uptime, is one node of the
fleet worse than the others. Every round is written here the moment it starts (status
`running`) and again when it ends, so a killed soak leaves a row that says so, and a
restarted one continues its count.

Where: a SQLite file (the default, one per node's volume) or a PostgreSQL database
the whole fleet shares (`db.connect`); the schema is the same (`schema.py`):

  soaks          soak_id, scenario, out_dir, started, ended, status, duration_s,
                 rounds_target, stop_on_breach, exit_code, tool_version
  rounds         soak_id, round, status (running|complete|partial), note, started,
                 ended, scenario, results_dir, run_id, vllm_version, c128a_layout,
                 server_start, restart_detected, server_restarts, priming, requests,
                 measured, gated_failures, allowed, role, upper_bound_95,
                 lower_bound_95, exit_code, ttft_p50/p90/p99, itl_p50/p99,
                 e2e_p50/p99, tokens_per_s, and what it ran on: host, gpu_name,
                 gpu_count, gpu_driver, image, image_digest, model, model_revision,
                 scenario_hash
  round_verdicts soak_id, round, phase, verdict, count  (records carrying the verdict)
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadgen.history.db import Database, connect, redact
from loadgen.history.rows import RoundRow
from loadgen.history.schema import ROUND_COLUMNS, SOAK_COLUMNS
from loadgen.history.statuses import RoundStatus

if TYPE_CHECKING:
    from loadgen.judge.gate.run_report import RunReport

# Round columns filled from a finished round (its summary.json and server facts).
RESULT_COLUMNS = (
    "run_id", "vllm_version", "c128a_layout", "server_restarts", "requests", "measured",
    "gated_failures", "allowed", "role", "upper_bound_95", "lower_bound_95", "exit_code",
    "ttft_p50", "ttft_p90", "ttft_p99", "itl_p50", "itl_p99", "e2e_p50", "e2e_p99",
    "tokens_per_s", "gpu_name", "gpu_count", "gpu_driver", "model", "model_revision",
)
#: Round columns known when a round starts: where it runs and what it runs.
START_COLUMNS = ("host", "image", "image_digest", "scenario_hash")


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
    """An open history database. Short transactions: several soaks may share one file,
    and a fleet one PostgreSQL database."""

    def __init__(self, target: str | Path, *, create: bool = True) -> None:
        self.target = target
        self.db: Database = connect(target, create=create)

    @property
    def path(self) -> str:
        """Where it is, as it may be printed (a URL's password hidden)."""
        return redact(self.target)

    @property
    def remote(self) -> bool:
        return self.db.dialect == "postgresql"

    def close(self) -> None:
        self.db.close()

    # -- soaks ----------------------------------------------------------------------

    def unfinished_soak(self, scenario: str, out_dir: str) -> Soak | None:
        """The soak a restarted command continues: same scenario, same out dir, not done."""
        rows = self.db.query(
            "SELECT * FROM soaks WHERE scenario = ? AND out_dir = ? "
            "AND status IN ('running', 'interrupted') ORDER BY started DESC LIMIT 1",
            (scenario, out_dir))
        return _soak(rows[0]) if rows else None

    def soak_row(self, soak_id: str) -> dict[str, Any] | None:
        rows = self.db.query("SELECT * FROM soaks WHERE soak_id = ?", (soak_id,))
        return rows[0] if rows else None

    def add_soak(self, soak: Soak, tool_version: str) -> None:
        with self.db.transaction() as db:
            db.execute(
                "INSERT INTO soaks (soak_id, scenario, out_dir, started, status, duration_s, "
                "rounds_target, stop_on_breach, tool_version) VALUES (?,?,?,?,?,?,?,?,?)",
                (soak.soak_id, soak.scenario, soak.out_dir, soak.started, soak.status,
                 soak.duration_s, soak.rounds_target, int(soak.stop_on_breach), tool_version))

    def update_soak(self, soak_id: str, **fields: Any) -> None:
        _check_columns(fields, {"status", "ended", "exit_code", "duration_s",
                                "rounds_target", "stop_on_breach"})
        with self.db.transaction() as db:
            db.execute(f"UPDATE soaks SET {', '.join(f'{k} = ?' for k in fields)} "
                       "WHERE soak_id = ?", (*fields.values(), soak_id))

    # -- rounds ---------------------------------------------------------------------

    def rounds(self, soak_id: str) -> list[RoundRow]:
        """A soak's rounds in order (without their verdict counts: `all_rounds` has them)."""
        return [RoundRow.from_row(r) for r in self.db.query(
            "SELECT * FROM rounds WHERE soak_id = ? ORDER BY round", (soak_id,))]

    def start_round(self, soak_id: str, number: int, *, started: float, scenario: str,
                    results_dir: str, priming: int, restart_detected: bool,
                    server_starts: dict[str, float | None],
                    identity: dict[str, Any] | None = None) -> None:
        """`identity`: what is known of the round before it runs (START_COLUMNS)."""
        identity = identity or {}
        _check_columns(identity, set(START_COLUMNS))
        known = [s for s in server_starts.values() if s is not None]
        fields = {"soak_id": soak_id, "round": number, "status": RoundStatus.RUNNING,
                  "started": started,
                  "scenario": scenario, "results_dir": results_dir, "priming": priming,
                  "restart_detected": int(restart_detected),
                  "server_start": max(known) if known else None,
                  "server_starts": json.dumps(server_starts), **identity}
        with self.db.transaction() as db:
            db.execute(f"INSERT INTO rounds ({', '.join(fields)}) "
                       f"VALUES ({', '.join('?' for _ in fields)})", tuple(fields.values()))

    def finish_round(self, soak_id: str, number: int, *, status: str, note: str | None,
                     ended: float, results: dict[str, Any],
                     verdicts: dict[str, dict[str, int]]) -> None:
        """Record a round's outcome and its per-phase verdict counts, in one transaction."""
        _check_columns(results, set(RESULT_COLUMNS))
        fields = {"status": status, "note": note, "ended": ended, **results}
        with self.db.transaction() as db:
            db.execute(f"UPDATE rounds SET {', '.join(f'{k} = ?' for k in fields)} "
                       "WHERE soak_id = ? AND round = ?", (*fields.values(), soak_id, number))
            db.execute("DELETE FROM round_verdicts WHERE soak_id = ? AND round = ?",
                       (soak_id, number))
            db.executemany(
                "INSERT INTO round_verdicts (soak_id, round, phase, verdict, count) "
                "VALUES (?,?,?,?,?)",
                [(soak_id, number, phase, verdict, count)
                 for phase, counts in verdicts.items() for verdict, count in counts.items()])

    def all_verdicts(self, soak_id: str, number: int) -> list[dict[str, Any]]:
        return self.db.query("SELECT * FROM round_verdicts WHERE soak_id = ? AND round = ?",
                             (soak_id, number))

    def verdict_counts(self, soak_id: str, number: int, phase: str = "measurement"
                       ) -> dict[str, int]:
        return {r["verdict"]: r["count"] for r in self.db.query(
            "SELECT verdict, count FROM round_verdicts WHERE soak_id = ? AND round = ? "
            "AND phase = ?", (soak_id, number, phase))}

    def all_rounds(self, *, soak_id: str | None = None, scenario: str | None = None,
                   last: int | None = None,
                   where: dict[str, str] | None = None) -> list[RoundRow]:
        """Rounds oldest first, with their measured verdict counts (the trend's rows).

        `where`: round column -> value it must equal (the `history` filters)."""
        clauses, args = [], []
        filters = {"soak_id": soak_id, "scenario": scenario, **(where or {})}
        _check_columns({k: v for k, v in filters.items() if v is not None}, set(ROUND_COLUMNS))
        for column, value in filters.items():
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT * FROM rounds" + (" WHERE " + " AND ".join(clauses) if clauses else "")
        sql += " ORDER BY started, soak_id, round"
        rows = [RoundRow.from_row(r) for r in self.db.query(sql, args)]
        if last:
            rows = rows[-last:]
        soaks = sorted({r.soak_id for r in rows})
        counts: dict[tuple[str, int | str], dict[str, int]] = {}
        for i in range(0, len(soaks), 500):
            chunk = soaks[i:i + 500]
            for v in self.db.query(
                    "SELECT soak_id, round, verdict, count FROM round_verdicts WHERE phase = "
                    f"'measurement' AND soak_id IN ({', '.join('?' for _ in chunk)})", chunk):
                counts.setdefault((v["soak_id"], v["round"]), {})[v["verdict"]] = v["count"]
        for row in rows:
            row.verdicts = counts.get((row.soak_id, row.round), {})
        return rows

    # -- copying (a soak's local spool into the fleet's database) ---------------------

    def upsert(self, soak: dict[str, Any], rounds: list[RoundRow],
               verdicts: list[dict[str, Any]]) -> None:
        """Write these rows as they are, replacing what the database has of them, in one
        transaction: copying the same rows twice leaves the same database."""
        with self.db.transaction() as db:
            _upsert(db, "soaks", SOAK_COLUMNS, ("soak_id",), soak)
            for row in rounds:
                _upsert(db, "rounds", ROUND_COLUMNS, ("soak_id", "round"), row.columns())
                db.execute("DELETE FROM round_verdicts WHERE soak_id = ? AND round = ?",
                           (row.soak_id, row.round))
            db.executemany(
                "INSERT INTO round_verdicts (soak_id, round, phase, verdict, count) "
                "VALUES (?,?,?,?,?)",
                [(v["soak_id"], v["round"], v["phase"], v["verdict"], v["count"])
                 for v in verdicts])


def _upsert(db: Any, table: str, columns: tuple[str, ...], key: tuple[str, ...],
            row: dict[str, Any]) -> None:
    cols = [c for c in columns if c in row]
    updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in key)
    db.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
               f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}",
               tuple(row[c] for c in cols))


def _soak(row: dict[str, Any]) -> Soak:
    soak = Soak(**{f.name: row[f.name] for f in dataclasses.fields(Soak)})
    soak.stop_on_breach = bool(soak.stop_on_breach)
    return soak



def _check_columns(fields: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(fields) - allowed
    if unknown:  # column names go into SQL text: only our own names may
        raise ValueError(f"unknown history columns: {sorted(unknown)}")


def round_results(report: RunReport) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    """A round's judged run -> (round columns, {phase: {verdict: records carrying it}}).

    Read from the typed report the round's reports were written from, never from
    summary.json by key: a renamed field is a type error here, not a silent None."""
    gate, server = report.gate, report.server
    phases = report.phase_summaries
    measurement = phases.get("measurement")
    latency = measurement.latency_s if measurement is not None else {}

    def q(key: str, p: str) -> float | None:
        return (latency.get(key) or {}).get(p)

    results = {
        "run_id": report.run.run_id,
        "vllm_version": ",".join(server.vllm_versions) or None,
        "c128a_layout": server.layout,
        "server_restarts": report.run.server_restarts,
        "requests": sum(p.requests for p in phases.values()),
        "measured": gate.measured,
        "gated_failures": gate.failures,
        "allowed": gate.allowed,
        "role": str(gate.role),
        "upper_bound_95": gate.upper_bound_95,
        "lower_bound_95": gate.lower_bound_95,
        "exit_code": gate.exit_code,
        "ttft_p50": q("ttft", "p50"), "ttft_p90": q("ttft", "p90"), "ttft_p99": q("ttft", "p99"),
        "itl_p50": q("inter_token", "p50"), "itl_p99": q("inter_token", "p99"),
        "e2e_p50": q("e2e", "p50"), "e2e_p99": q("e2e", "p99"),
        "tokens_per_s": measurement.tokens_per_s if measurement is not None else None,
    }
    verdicts = {phase: dict(p.verdicts) for phase, p in phases.items()}
    return results, verdicts
