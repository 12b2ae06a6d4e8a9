"""Reading a history the way a person with `sqlite3` or `psql` would, for either backend."""

from __future__ import annotations

import sqlite3
from typing import Any


def query(target: str, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Rows as dicts; `?` placeholders for both backends."""
    if target.startswith(("postgresql://", "postgres://")):
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(target, row_factory=dict_row) as conn:
            return list(conn.execute(sql.replace("?", "%s"), args).fetchall())
    con = sqlite3.connect(target)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, args)]
    finally:
        con.close()


def execute(target: str, sql: str, args: tuple[Any, ...] = ()) -> None:
    if target.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), args)
        return
    con = sqlite3.connect(target)
    try:
        con.execute(sql, args)
        con.commit()
    finally:
        con.close()
