"""The results directory is versioned: every file a run writes says which schema it is,
an older directory is read as written, and one a newer release wrote is refused with a
one-line reason (exit 3), never half-read into a verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.exit_codes import ExitCode
from loadgen.results import (
    RESULTS_SCHEMA,
    RUN_FILE,
    SCHEMA_KEY,
    SERVER_FILE,
    SUMMARY_FILE,
)
from tests.loadgen.conftest import run_cli
from tests.support.reports import record, write_run_dir


def _stamp(path: Path, version: object) -> None:
    doc = json.loads(path.read_text())
    if version is None:
        doc.pop(SCHEMA_KEY, None)
    else:
        doc[SCHEMA_KEY] = version
    path.write_text(json.dumps(doc))


def test_every_file_of_a_run_carries_the_schema(tmp_path: Path) -> None:
    out = write_run_dir(tmp_path / "run", [record(i) for i in range(4)], server={})
    assert run_cli("report", str(out)).returncode in (ExitCode.PASSED, ExitCode.RUN_INVALID)
    for name in (RUN_FILE, SERVER_FILE, SUMMARY_FILE):
        assert json.loads((out / name).read_text())[SCHEMA_KEY] == RESULTS_SCHEMA, name


def test_a_directory_from_before_the_stamp_is_read_as_written(tmp_path: Path) -> None:
    out = write_run_dir(tmp_path / "run", [record(i) for i in range(4)], server={})
    first = run_cli("report", str(out))
    summary = json.loads((out / SUMMARY_FILE).read_text())
    for name in (RUN_FILE, SERVER_FILE):
        _stamp(out / name, None)
    again = run_cli("report", str(out))
    assert again.returncode == first.returncode
    rebuilt = json.loads((out / SUMMARY_FILE).read_text())
    assert rebuilt["gate"] == summary["gate"] and rebuilt["phases"] == summary["phases"]


@pytest.mark.parametrize(("name", "version", "words"), [
    (RUN_FILE, RESULTS_SCHEMA + 1, "newer dsv4-qual"),
    (SERVER_FILE, RESULTS_SCHEMA + 5, "newer dsv4-qual"),
    (RUN_FILE, "two", "not a version"),
])
def test_a_newer_or_unknown_schema_is_refused(tmp_path: Path, name: str, version: object,
                                              words: str) -> None:
    out = write_run_dir(tmp_path / "run", [record(i) for i in range(4)], server={})
    _stamp(out / name, version)
    done = run_cli("report", str(out))
    assert done.returncode == ExitCode.BAD_INPUT, done.stdout + done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (out / SUMMARY_FILE).exists()  # nothing judged from it
