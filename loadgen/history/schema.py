"""The history's one schema, for SQLite and PostgreSQL alike, and its migrations.

One fleet, one database: every node's soak writes the same tables, whether its
`--history` is a SQLite file on its own volume or a PostgreSQL server all nodes share.
The DDL is written once; the only dialect difference is the floating-point type
(PostgreSQL's REAL is 4 bytes, which would round a Unix time to minutes).

Versions: 1 is the SQLite-only history of the first soaks; 2 adds what each round ran
on (host, GPUs, image, model and revision, the resolved scenario's hash). A database
is migrated forward when opened, never backward: a newer one is refused, so an old
dsv4-qual never writes rows that lack what a newer one records.
"""

from __future__ import annotations

SCHEMA_VERSION = 2

_TABLES = """
CREATE TABLE IF NOT EXISTS soaks (
    soak_id        TEXT PRIMARY KEY,
    scenario       TEXT NOT NULL,
    out_dir        TEXT NOT NULL,
    started        {real} NOT NULL,
    ended          {real},
    status         TEXT NOT NULL,
    duration_s     {real},
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
    started          {real} NOT NULL,
    ended            {real},
    scenario         TEXT NOT NULL,
    results_dir      TEXT NOT NULL,
    run_id           TEXT,
    vllm_version     TEXT,
    c128a_layout     TEXT,
    server_start     {real},
    server_starts    TEXT,
    restart_detected INTEGER NOT NULL DEFAULT 0,
    server_restarts  INTEGER,
    priming          INTEGER NOT NULL DEFAULT 0,
    requests         INTEGER,
    measured         INTEGER,
    gated_failures   INTEGER,
    allowed          INTEGER,
    role             TEXT,
    upper_bound_95   {real},
    lower_bound_95   {real},
    exit_code        INTEGER,
    ttft_p50         {real},
    ttft_p90         {real},
    ttft_p99         {real},
    itl_p50          {real},
    itl_p99          {real},
    e2e_p50          {real},
    e2e_p99          {real},
    tokens_per_s     {real},
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

#: Version 2: what a round ran on. NULL where the server or the node did not say.
ROUND_FACT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("host", "TEXT"),            # the node the load generator ran on (DSV4_QUAL_HOST)
    ("gpu_name", "TEXT"),        # from the plugin's receipts (NVML), comma-joined if mixed
    ("gpu_count", "INTEGER"),
    ("gpu_driver", "TEXT"),
    ("image", "TEXT"),           # the server image as compose names it
    ("image_digest", "TEXT"),    # its digest pin, sha256:...
    ("model", "TEXT"),           # the checkpoint the model processes loaded, else /v1/models
    ("model_revision", "TEXT"),  # the revision the receipts name
    ("scenario_hash", "TEXT"),   # sha256 of the scenario as run (see identity.scenario_hash)
)
_V2_INDEXES = ("CREATE INDEX IF NOT EXISTS rounds_by_host ON rounds (host, started)",)

#: Every column of each table at SCHEMA_VERSION, in order (what a copy carries).
SOAK_COLUMNS = ("soak_id", "scenario", "out_dir", "started", "ended", "status", "duration_s",
                "rounds_target", "stop_on_breach", "exit_code", "tool_version")
ROUND_COLUMNS = (
    "soak_id", "round", "status", "note", "started", "ended", "scenario", "results_dir",
    "run_id", "vllm_version", "c128a_layout", "server_start", "server_starts",
    "restart_detected", "server_restarts", "priming", "requests", "measured",
    "gated_failures", "allowed", "role", "upper_bound_95", "lower_bound_95", "exit_code",
    "ttft_p50", "ttft_p90", "ttft_p99", "itl_p50", "itl_p99", "e2e_p50", "e2e_p99",
    "tokens_per_s", *(name for name, _ in ROUND_FACT_COLUMNS))
VERDICT_COLUMNS = ("soak_id", "round", "phase", "verdict", "count")


def _real(dialect: str) -> str:
    return "DOUBLE PRECISION" if dialect == "postgresql" else "REAL"


def create_statements(dialect: str) -> list[str]:
    """The statements that make an empty database a history at SCHEMA_VERSION."""
    tables = [s.strip() for s in _TABLES.format(real=_real(dialect)).split(";") if s.strip()]
    return tables + migrate_statements(1, dialect)


def migrate_statements(version: int, dialect: str) -> list[str]:
    """What takes a history at `version` to SCHEMA_VERSION (empty when it is there)."""
    statements: list[str] = []
    if version < 2:
        statements += [f"ALTER TABLE rounds ADD COLUMN {name} {kind}"
                       for name, kind in ROUND_FACT_COLUMNS]
        statements += list(_V2_INDEXES)
    return statements
