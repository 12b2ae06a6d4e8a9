"""Patch receipts: one JSON file per process, rewritten atomically on each update.

A candidate gate must not take "the server was patched" on faith: every
process that loads the plugin (API server, engine core, each worker) leaves a
receipt naming the layout, the vLLM version and, once the builder has run, the
row stride and width it really used. Readers (the load generator, people) may
read the file at any moment, so it is only ever replaced whole (temp file +
rename), never written in place. Sections can be added later (a stride guard
flushes its counters into the same file) through ``Receipt.update``.

Standard library only: the embedded reference server writes receipts too,
without vLLM.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

SCHEMA = 1
TOOL = "dsv4-qual"
#: The section naming the server start (``server_patch.server_start``).
SERVER_SECTION = "server"
DISTRIBUTION = "dsv4-qual"


def tool_version() -> str:
    """The installed dsv4-qual version, or "unknown" when run from a source tree."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def utc_now() -> str:
    """ISO 8601 UTC with a Z suffix, millisecond precision."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def process_title() -> str:
    """Best-effort role of this process: its title (e.g. "VLLM::Worker_TP0"), else argv[0]."""
    try:
        import setproctitle  # vLLM depends on it; optional here

        title = setproctitle.getproctitle()
        if title:
            return title
    except Exception:
        pass
    return sys.argv[0] if sys.argv and sys.argv[0] else sys.executable


def receipt_path(directory: str | os.PathLike[str], hostname: str, pid: int) -> Path:
    """``<directory>/<hostname>-<pid>.json``."""
    return Path(directory) / f"{hostname}-{pid}.json"


def write_json_atomic(path: Path, payload: Mapping[str, Any], *, durable: bool = True) -> None:
    """Replace ``path`` whole: a reader sees the old file or the new one, never a half.

    ``durable`` fsyncs the data before the rename, so the new file also
    survives a machine crash; readers need only the rename. Writers on a hot
    path (the stride guard's periodic counts) pass False: an fsync can take
    milliseconds on a busy disk.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        # mkstemp makes 0600 files; receipts are read by other users/containers.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_receipts(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete receipt in ``directory`` (temp files and unreadable files skipped)."""
    found = []
    for path in sorted(Path(directory).glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return found


class Receipt:
    """This process's receipt file; every ``update`` rewrites it whole.

    If the process forks after the receipt was made, the child's first update
    moves to the child's own ``<hostname>-<pid>.json`` (recording
    ``forked_from``, and the server start as the child sees it) instead of
    overwriting the parent's file.
    """

    def __init__(self, directory: str | os.PathLike[str], fields: Mapping[str, Any]) -> None:
        self._directory = Path(directory)
        self._lock = threading.Lock()
        hostname = socket.gethostname()
        self._data: dict[str, Any] = {
            "schema": SCHEMA,
            "tool": TOOL,
            "tool_version": tool_version(),
            "pid": os.getpid(),
            "process": process_title(),
            "process_name": multiprocessing.current_process().name,
            "hostname": hostname,
            "time": utc_now(),
        }
        self._data.update(fields)

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def path(self) -> Path:
        return receipt_path(self._directory, self._data["hostname"], self._data["pid"])

    def snapshot(self) -> dict[str, Any]:
        """A copy of what the file holds (or will hold after the next write)."""
        with self._lock:
            return json.loads(json.dumps(self._data, default=str))

    def _follow_fork(self) -> None:
        pid = os.getpid()
        if self._data["pid"] != pid:
            self._data["forked_from"] = self._data["pid"]
            self._data["pid"] = pid
            self._data["process"] = process_title()
            self._data["process_name"] = multiprocessing.current_process().name
            if SERVER_SECTION in self._data:  # the same start, seen from the child
                from server_patch.server_start import current

                self._data[SERVER_SECTION] = current().section()

    def update(self, **fields: Any) -> Path:
        """Set top-level keys (a whole section, e.g. ``first_call=...``) and rewrite the file."""
        with self._lock:
            self._follow_fork()
            self._data.update(fields)
            write_json_atomic(self.path, self._data)
            return self.path

    def merge_section(
        self, name: str, values: Mapping[str, Any], *, durable: bool = True
    ) -> Path:
        """Merge ``values`` into the dict section ``name`` (made if absent) and rewrite the file.

        For writers that add to a section over time (counters flushed
        periodically); ``durable=False`` skips the fsync (see ``write_json_atomic``).
        """
        with self._lock:
            self._follow_fork()
            section = dict(self._data.get(name) or {})
            section.update(values)
            self._data[name] = section
            write_json_atomic(self.path, self._data, durable=durable)
            return self.path

    def write(self) -> Path:
        """Rewrite the file with the current content."""
        return self.update()
