"""The results directory of one run: where it goes, its file names, how a run is read back.

Everything a run learns goes to disk as it happens (records.jsonl line by line,
run.json at the start and at the end, server.json after the phases), and every
report is rebuilt from these files, so a killed run or a change of report code
loses nothing (how each file is written: `files`; what run.json holds: `run_facts`).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loadgen.exit_codes import BadInputError
from loadgen.files import read_json, write_json
from loadgen.run_facts import RunFacts
from loadgen.scenario import Scenario

RECORDS_FILE = "records.jsonl"
RUN_FILE = "run.json"
SERVER_FILE = "server.json"
SUMMARY_FILE = "summary.json"
MARKDOWN_FILE = "report.md"
JUNIT_FILE = "junit.xml"
HTML_FILE = "report.html"
#: A qualification's (qualify, demo) two sides, each a run's results directory.
CONTROL_DIR = "control"
CANDIDATE_DIR = "candidate"
QUALIFY_FILE = "qualify.json"

RESULTS_ROOT_ENV = "DSV4_QUAL_RESULTS_ROOT"

#: The results directory's format, stamped on run.json, server.json and summary.json.
#: 1: files written before the stamp, read as written (every reader takes a key it
#: does not find as unknown, never as a figure); 2: the stamp. A directory stamped by a
#: newer release is refused, not half-read: its verdict could rest on what this one
#: does not know.
RESULTS_SCHEMA = 2
SCHEMA_KEY = "schema"

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


#: Held (flock) by the process that writes a results directory, for as long as it does.
LOCK_FILE = ".dsv4-qual.lock"


@contextlib.contextmanager
def claimed(out: Path, what: str, fresh: bool = True) -> Iterator[Path]:
    """The results directory `out`, created, writable and held by this process until the
    block ends: a second run, demo, qualify or soak aimed at it refuses at once (one
    line, exit 3) rather than append its records to this one's, since a results file
    that mixes two runs is the worst thing this tool could write. `fresh`: the directory
    must hold no earlier run (a soak's does, and is resumed)."""
    prepare_out_dir(out, fresh=False)
    try:
        fh = open(out / LOCK_FILE, "a+")  # noqa: SIM115
    except OSError as exc:
        raise BadInputError(f"--out {out}: results directory not writable "
                            f"({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "process"
            raise BadInputError(f"--out {out}: another dsv4-qual {holder} is writing there "
                                "right now; choose another directory") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{what} (pid {os.getpid()})\n")
        fh.flush()
        if fresh:
            _refuse_earlier_results(out)
        yield out
    finally:
        fh.close()


def _refuse_earlier_results(out: Path) -> None:
    earlier = [name for name in (RUN_FILE, QUALIFY_FILE, CONTROL_DIR, CANDIDATE_DIR)
               if (out / name).exists()]
    records = out / RECORDS_FILE
    if records.exists() and records.stat().st_size:
        earlier.append(RECORDS_FILE)
    if earlier:
        raise BadInputError(f"--out {out}: already holds an earlier run ({earlier[0]}); "
                            "choose a new directory (results are never overwritten)")


def prepare_out_dir(out: Path, fresh: bool = True) -> Path:
    """Create the results directory and prove it writable, before any request."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise BadInputError(f"--out {out}: results directory not writable "
                            f"({exc.strerror or exc})") from None
    if fresh and (out / RECORDS_FILE).exists() and (out / RECORDS_FILE).stat().st_size:
        raise BadInputError(f"--out {out}: already holds a run's records; "
                            "choose a new directory (results are never overwritten)")
    return out


def stamped(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with this release's results schema, as every file of a run is written."""
    return {SCHEMA_KEY: RESULTS_SCHEMA, **doc}


def check_schema(path: Path, doc: dict[str, Any]) -> int:
    """The schema a file was written with (1: no stamp); a newer one is bad input."""
    version = doc.get(SCHEMA_KEY, 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInputError(f"{path}: results schema {version!r} is not a version")
    if version > RESULTS_SCHEMA:
        raise BadInputError(f"{path}: written by a newer dsv4-qual (results schema {version}; "
                            f"this release reads up to {RESULTS_SCHEMA}): read it with that "
                            "release or a later one")
    return version


def write_run(out_dir: Path, scenario: Scenario, facts: RunFacts) -> None:
    """run.json: the resolved scenario and the run's facts (`report` needs both)."""
    write_json(out_dir / RUN_FILE, stamped({"scenario": scenario.model_dump(mode="json"),
                                            "run": facts.to_dict()}))


def write_server(out_dir: Path, document: dict[str, Any]) -> None:
    """server.json: what the servers said, their /metrics and the receipts selected."""
    write_json(out_dir / SERVER_FILE, stamped(document))


def is_run_dir(out_dir: Path) -> bool:
    return (out_dir / RUN_FILE).is_file()


def load_run(out_dir: Path) -> tuple[Scenario, RunFacts]:
    """The scenario and run facts saved when the run started (and updated at its end)."""
    doc = read_json(out_dir / RUN_FILE)
    if not doc:
        raise BadInputError(f"{out_dir}: no {RUN_FILE}: not a dsv4-qual results directory")
    check_schema(out_dir / RUN_FILE, doc)
    try:
        scenario = Scenario.model_validate(doc.get("scenario") or {})
    except ValueError as exc:
        raise BadInputError(f"{out_dir / RUN_FILE}: scenario unreadable: {exc}") from None
    return scenario, RunFacts.from_dict(doc.get("run") or {})


def load_server(out_dir: Path) -> dict[str, Any]:
    """server.json (what the server told us and its receipts); {} when the run never got there."""
    doc = read_json(out_dir / SERVER_FILE)
    check_schema(out_dir / SERVER_FILE, doc)
    return doc
