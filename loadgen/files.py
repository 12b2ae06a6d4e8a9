"""How the tool writes and reads its JSON files.

Files people and dashboards read are replaced whole (temp file + rename, synced first),
never written in place, so a reader never sees half a file and a rewrite that fails
leaves the old one; a file read back that is missing or unreadable is an empty
document, never an exception in the middle of a report.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A file that replaces `path` whole when the block ends (synced to disk first), and
    not at all when it raises: readers (dashboards, a second `report`) never see half a
    file, and a rewrite that fails leaves the old one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, data: bytes) -> None:
    with atomic_writer(path) as handle:
        handle.write(data)


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))


def rounded(obj: Any, digits: int = 12) -> Any:
    """Floats to `digits` significant digits, through lists and dicts: documents people
    read (summary.json, qualify.json) say 0.103, not 0.10300000000000864 (12 digits keep
    an epoch timestamp to the hundredth of a second)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [rounded(v, digits) for v in obj]
    return obj


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file, or {} when it is missing, unreadable or not an object."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
