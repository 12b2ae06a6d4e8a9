"""Where a results directory goes, what its files are called, and who may write it.

A results directory is written by one process at a time and never over an earlier run
(`claimed`): a file that mixed two runs would be the worst thing this tool could write.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path

from loadgen.exit_codes import BadInputError

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


def is_run_dir(out_dir: Path) -> bool:
    """Does `out_dir` hold a run (its run.json), rather than a qualification or a soak?"""
    return (out_dir / RUN_FILE).is_file()
