"""One connection to a history database, SQLite or PostgreSQL, behind the same calls.

The SQL of the history is written once, with `?` placeholders; PostgreSQL's driver
(psycopg 3) wants `%s`, so its statements are rewritten here. Writes go through
`transaction()`: SQLite takes its write lock at once (BEGIN IMMEDIATE: several soaks
may share one file), PostgreSQL runs them in one transaction per call. Opening a
database creates or migrates its schema under a lock, so that ten nodes starting at
22:00 do not race to create the same tables.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from loadgen.exit_codes import BadInputError
from loadgen.history.schema import SCHEMA_VERSION, create_statements, migrate_statements

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: How long a soak waits for PostgreSQL to answer a connection before it keeps the
#: round locally (a down database must not stall the soak's rounds).
CONNECT_TIMEOUT_S = 5
_VERSION_TABLE = "dsv4_qual_schema"
#: pg_advisory_xact_lock key: one schema creation or migration at a time.
_SCHEMA_LOCK = 0x64737634  # "dsv4"


def is_postgres(target: str | Path) -> bool:
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


def redact(target: str | Path) -> str:
    """A history target as it may be printed: a URL's password is never shown."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", str(target))


class Cursor(Protocol):
    def execute(self, sql: str, args: Sequence[Any] = ...) -> Any: ...

    def executemany(self, sql: str, args: Sequence[Sequence[Any]]) -> Any: ...


class Database:
    """The calls the history makes; `SqliteDatabase` and `PostgresDatabase` implement them."""

    dialect: str
    label: str

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        raise NotImplementedError

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        raise NotImplementedError
        yield  # pragma: no cover

    def close(self) -> None:
        raise NotImplementedError


class SqliteDatabase(Database):
    dialect = "sqlite"

    def __init__(self, path: Path, *, create: bool) -> None:
        self.label = str(path)
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
        try:
            _refuse_newer(version, path)
        except BadInputError:
            self.close()
            raise
        if version == 0 and not create and not self.query(
                "SELECT name FROM sqlite_master WHERE name = 'rounds'"):
            self.close()
            raise BadInputError(f"{path}: not a dsv4-qual history database")
        if version < SCHEMA_VERSION:
            self._migrate(version, read_only_ok=not create)

    def _migrate(self, version: int, *, read_only_ok: bool) -> None:
        # Version 0 with a `rounds` table cannot be: v1 set user_version at creation.
        try:
            with self.transaction() as db:
                now = db.execute("PRAGMA user_version").fetchone()[0]  # another writer won?
                steps = create_statements("sqlite") if now == 0 else \
                    migrate_statements(now, "sqlite")
                for statement in steps:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.OperationalError as exc:
            if read_only_ok and "readonly" in str(exc).replace(" ", ""):
                return  # read as it is: the columns it lacks read as unknown
            raise BadInputError(f"{self.label}: cannot update the history's schema "
                                f"({exc})") from None

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.db.execute(sql, tuple(args))]

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
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

    def close(self) -> None:
        self.db.close()


class _PgCursor:
    """A psycopg cursor that takes the history's `?` placeholders."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.cursor.execute(_pg(sql), tuple(args))

    def executemany(self, sql: str, args: Sequence[Sequence[Any]]) -> Any:
        rows = [tuple(a) for a in args]
        if rows:
            self.cursor.executemany(_pg(sql), rows)


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


class PostgresDatabase(Database):
    """psycopg 3, autocommit outside `transaction()`; the password never appears in errors."""

    dialect = "postgresql"

    def __init__(self, url: str, *, create: bool) -> None:
        import psycopg
        from psycopg.rows import dict_row

        self.label = redact(url)
        try:
            # A write to a database behind a dead link fails within ~30 s, never hangs.
            self.conn = psycopg.connect(url, autocommit=True, row_factory=dict_row,
                                        connect_timeout=CONNECT_TIMEOUT_S, keepalives=1,
                                        keepalives_idle=10, keepalives_interval=5,
                                        keepalives_count=3, tcp_user_timeout=30_000)
        except psycopg.Error as exc:
            raise HistoryUnavailable(f"{self.label}: cannot connect "
                                     f"({_first_line(exc)})") from None
        try:
            self._check_schema(create)
        except BaseException:
            self.close()
            raise

    def _check_schema(self, create: bool) -> None:
        import psycopg

        try:
            with self.transaction() as db:
                db.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
                db.execute("SELECT to_regclass(?) AS t", (_VERSION_TABLE,))
                has_version = db.cursor.fetchone()["t"] is not None
                version = 0
                if has_version:
                    db.execute(f"SELECT max(version) AS v FROM {_VERSION_TABLE}")
                    version = db.cursor.fetchone()["v"] or 0
                _refuse_newer(version, self.label)
                if version == SCHEMA_VERSION:
                    return
                if not create and version == 0:
                    raise BadInputError(f"{self.label}: not a dsv4-qual history database "
                                        "(no history tables)")
                steps = create_statements("postgresql") if version == 0 else \
                    migrate_statements(version, "postgresql")
                for statement in steps:
                    db.execute(statement)
                db.execute(f"CREATE TABLE IF NOT EXISTS {_VERSION_TABLE} "
                           "(version INTEGER NOT NULL)")
                db.execute(f"DELETE FROM {_VERSION_TABLE}")
                db.execute(f"INSERT INTO {_VERSION_TABLE} (version) VALUES (?)",
                           (SCHEMA_VERSION,))
        except psycopg.OperationalError as exc:
            raise HistoryUnavailable(f"{self.label}: {_first_line(exc)}") from None
        except psycopg.Error as exc:
            raise BadInputError(f"{self.label}: cannot set up the history's schema "
                                f"({_first_line(exc)})") from None

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self.conn.cursor() as cur:
            cur.execute(_pg(sql), tuple(args))
            return list(cur.fetchall())

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self.conn.transaction(), self.conn.cursor() as cur:
            yield _PgCursor(cur)

    def close(self) -> None:
        self.conn.close()


class HistoryUnavailable(BadInputError):
    """The database cannot be reached (a soak keeps its rounds locally meanwhile)."""


def unavailable_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean 'the database went away', not 'the request was wrong'."""
    import psycopg

    return (psycopg.OperationalError, psycopg.InterfaceError, HistoryUnavailable)


def _refuse_newer(version: int, where: object) -> None:
    if version > SCHEMA_VERSION:
        raise BadInputError(
            f"{where}: history schema v{version} is newer than this dsv4-qual "
            f"(v{SCHEMA_VERSION}); upgrade dsv4-qual to write to it")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return redact(text[0]) if text else type(exc).__name__


def connect(target: str | Path, *, create: bool = True) -> Database:
    """A SQLite path or a postgresql:// URL, opened (schema created or migrated)."""
    if is_postgres(target):
        return PostgresDatabase(str(target), create=create)
    return SqliteDatabase(Path(target), create=create)
