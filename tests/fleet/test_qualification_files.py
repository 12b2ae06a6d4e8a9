"""qualify.json is read through its model: the fleet's row of a node comes from typed
fields, an older file without a key reads it as unknown, and a newer schema or a file
of the wrong shape fails that node by name, never silently."""

from __future__ import annotations

import json
from pathlib import Path

from loadgen.fleet.qualifications import qualification_rows
from loadgen.results import RESULTS_SCHEMA, SCHEMA_KEY
from loadgen.results.qualification import QualificationFile, QualificationSide


def _write(folder: Path, doc: dict[str, object]) -> Path:
    folder.mkdir(parents=True)
    (folder / "qualify.json").write_text(json.dumps(doc))
    return folder


def test_a_qualification_reads_as_the_nodes_round(tmp_path: Path) -> None:
    _write(tmp_path / "gpu-1", {
        SCHEMA_KEY: RESULTS_SCHEMA, "node": "gpu-1", "started": 100.0, "finished": 160.5,
        "exit_code": 0, "scenario": "mixed", "headline": "QUALIFIED (exit 0)",
        "control": {"vllm_release": "0.9.0"},
        "candidate": {"vllm_release": "0.9.1", "layout": "fused", "measured": 40,
                      "failures": 0, "a_key_from_later": 1}})
    (row,) = qualification_rows(tmp_path)
    assert (row.host, row.started, row.ended, row.exit_code, row.scenario) == \
        ("gpu-1", 100.0, 160.5, 0, "mixed")
    assert (row.verdict_line, row.vllm_version, row.c128a_layout, row.measured,
            row.gated_failures, row.note) == ("QUALIFIED (exit 0)", "0.9.1", "fused", 40, 0,
                                              None)


def test_an_older_qualification_without_a_candidate_or_stamp_reads_as_written(
        tmp_path: Path) -> None:
    _write(tmp_path / "gpu-2", {"node": "gpu-2", "exit_code": 2, "verdict": "INVALID",
                                "control": {"vllm_release": "0.8"}, "candidate": None})
    (row,) = qualification_rows(tmp_path)
    assert (row.host, row.verdict_line, row.vllm_version, row.measured) == \
        ("gpu-2", "INVALID", "0.8", None)
    assert row.started is not None  # the file's time: it said none


def test_a_newer_schema_or_a_wrong_shape_fails_the_node_by_name(tmp_path: Path) -> None:
    _write(tmp_path / "gpu-3", {SCHEMA_KEY: RESULTS_SCHEMA + 1, "node": "gpu-3"})
    _write(tmp_path / "gpu-4", {"node": "gpu-4", "candidate": "not a side"})
    rows = {r.host: r for r in qualification_rows(tmp_path)}
    assert rows["gpu-3"].exit_code is None and "newer dsv4-qual" in (rows["gpu-3"].note or "")
    assert rows["gpu-4"].exit_code is None and "candidate" in (rows["gpu-4"].note or "")


def test_written_and_read_back_the_document_is_the_same() -> None:
    side = QualificationSide(results_dir="control", role="control", measured=10, failures=6,
                             failure_rate=0.6)
    doc = QualificationFile(command="qualify", scenario="s", verdict="QUALIFIED", exit_code=0,
                            control=side, candidate=None)
    again = QualificationFile.model_validate(json.loads(doc.model_dump_json()))
    assert again == doc and again.control.measured == 10
