"""The results directory of one run: its file names, how files are written, how a run is read back.

Everything a run learns goes to disk as it happens (records.jsonl line by line,
run.json at the start and at the end, server.json after the phases), and every
report is rebuilt from these files, so a killed run or a change of report code
loses nothing. Files people and dashboards read are replaced whole (temp file +
rename), never written in place.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from loadgen.exit_codes import BadInputError
from loadgen.scenario import Scenario

RECORDS_FILE = "records.jsonl"
RUN_FILE = "run.json"
SERVER_FILE = "server.json"
SUMMARY_FILE = "summary.json"
MARKDOWN_FILE = "report.md"
JUNIT_FILE = "junit.xml"
HTML_FILE = "report.html"

RESULTS_ROOT_ENV = "DSV4_QUAL_RESULTS_ROOT"


@dataclass
class RunFacts:
    """What a run learnt beyond its records (run.json's `run`, summary.json's `run`)."""

    run_id: str
    scenario: str
    base_urls: list[str]
    model: str = ""
    started: float = field(default_factory=time.time)
    finished: float | None = None
    interrupted: str | None = None
    invalid: str | None = None
    ready: list[dict[str, Any]] = field(default_factory=list)
    chars_per_token: float | None = None
    server_restarts: int = 0
    phases_done: list[str] = field(default_factory=list)
    #: The items the reference phase sent, one request each (empty: no reference phase).
    reference_items: list[str] = field(default_factory=list)
    #: The load as shipped and as run (`load_claim.LoadClaim.to_dict`).
    load: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunFacts:
        """Tolerant of keys a newer or older writer added or left out."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("run_id", "")
        values.setdefault("scenario", "")
        values.setdefault("base_urls", [])
        return cls(**values)

    @property
    def duration_s(self) -> float | None:
        if self.started and self.finished:
            return self.finished - self.started
        return None


_RUN_IDS = itertools.count(1)


def new_run_id() -> str:
    """Sortable by time, distinct across processes started in the same second and across
    runs of one process (qualify, soak and demo start several)."""
    return (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            + f"-{os.getpid() % 100000:05d}-{next(_RUN_IDS)}")


def results_root() -> Path:
    """Where results directories go unless --out says otherwise: `results/`, or the
    folder DSV4_QUAL_RESULTS_ROOT names (the loadgen image sets it to its volume)."""
    return Path(os.environ.get(RESULTS_ROOT_ENV) or "results")


def default_out_dir(kind: str, name: str, run_id: str) -> Path:
    """`<root>/<kind>-<name>-<id>`, the forms README and `--help` show: a run
    `<scenario>-<id>` (kind empty), a qualification `qualify-<scenario>-<id>`, the demo
    `demo-<id>` (name empty). A plain run of a scenario without a name is `run-<id>`."""
    stem = "-".join(part for part in (kind, name or ("" if kind else "run"), run_id) if part)
    return results_root() / stem


def prepare_out_dir(out: Path) -> Path:
    """Create the results directory and prove it writable, before any request."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise BadInputError(f"--out {out}: results directory not writable "
                            f"({exc.strerror or exc})") from None
    if (out / RECORDS_FILE).exists() and (out / RECORDS_FILE).stat().st_size:
        raise BadInputError(f"--out {out}: already holds a run's records; "
                            "choose a new directory (results are never overwritten)")
    return out


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


def write_run(out_dir: Path, scenario: Scenario, facts: RunFacts) -> None:
    """run.json: the resolved scenario and the run's facts (`report` needs both)."""
    write_json(out_dir / RUN_FILE, {"scenario": scenario.model_dump(mode="json"),
                                    "run": facts.to_dict()})


def is_run_dir(out_dir: Path) -> bool:
    return (out_dir / RUN_FILE).is_file()


def load_run(out_dir: Path) -> tuple[Scenario, RunFacts]:
    """The scenario and run facts saved when the run started (and updated at its end)."""
    doc = read_json(out_dir / RUN_FILE)
    if not doc:
        raise BadInputError(f"{out_dir}: no {RUN_FILE}: not a dsv4-qual results directory")
    try:
        scenario = Scenario.model_validate(doc.get("scenario") or {})
    except ValueError as exc:
        raise BadInputError(f"{out_dir / RUN_FILE}: scenario unreadable: {exc}") from None
    return scenario, RunFacts.from_dict(doc.get("run") or {})


def load_server(out_dir: Path) -> dict[str, Any]:
    """server.json (what the server told us and its receipts); {} when the run never got there."""
    return read_json(out_dir / SERVER_FILE)
