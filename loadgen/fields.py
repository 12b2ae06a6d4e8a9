"""Typed reads of JSON a server, a plugin or an older file wrote.

Receipts, replies and records come from processes this tool does not control: a key may
be missing or hold another type. These reads return the type the caller needs or its
empty value, so one bad field never raises deep in the judge, and the type checker
knows what each read gives.
"""

from __future__ import annotations

from typing import Any


def section(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """`doc[key]` when it is an object, else an empty one."""
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def text(doc: dict[str, Any], key: str) -> str | None:
    """`doc[key]` when it is a string, else None."""
    value = doc.get(key)
    return value if isinstance(value, str) else None
