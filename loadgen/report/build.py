"""Rebuild every report of a results directory from what is on disk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from loadgen.exit_codes import BadInputError
from loadgen.judge.aggregate import aggregate
from loadgen.judge.gate import evaluate
from loadgen.records import RECORDS_FILE
from loadgen.report.junit import write_junit
from loadgen.report.markdown import render_markdown
from loadgen.report.summary import build_summary
from loadgen.scenario import Scenario

RUN_FILE = "run.json"
SERVER_FILE = "server.json"


def write_atomic(path: Path, data: bytes) -> None:
    """Readers (dashboards, a second `report`) never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def load_run(out_dir: Path) -> tuple[Scenario, dict[str, Any]]:
    """The scenario and run facts saved when the run started (and updated at its end)."""
    doc = _read_json(out_dir / RUN_FILE)
    if not doc:
        raise BadInputError(f"{out_dir}: no {RUN_FILE}: not a dsv4-qual results directory")
    try:
        scenario = Scenario.model_validate(doc.get("scenario") or {})
    except ValueError as exc:
        raise BadInputError(f"{out_dir / RUN_FILE}: scenario unreadable: {exc}") from None
    return scenario, doc.get("run") or {}


def write_reports(out_dir: Path, html: bool = True) -> dict[str, Any]:
    """summary.json, report.md, junit.xml (and report.html) from records.jsonl."""
    if not (out_dir / RECORDS_FILE).exists() and not (out_dir / RUN_FILE).exists():
        raise BadInputError(f"{out_dir}: no {RECORDS_FILE}: not a dsv4-qual results directory")
    scenario, run = load_run(out_dir)
    server = _read_json(out_dir / SERVER_FILE)
    stats = aggregate(out_dir, [str(v) for v in scenario.gate.fail_on])
    gate = evaluate(
        scenario.gate, stats.phases.get("measurement"),
        interrupted=run.get("interrupted"), invalid=run.get("invalid"),
        receipts=server.get("receipts_summary"),
        gate_stride_violations=scenario.gate.fail_on_stride_violations,
    )
    summary = build_summary(scenario.model_dump(mode="json"), run, stats, gate, server)
    write_json(out_dir / "summary.json", summary)
    write_atomic(out_dir / "report.md", render_markdown(summary, stats, gate).encode())
    started, finished = run.get("started"), run.get("finished")
    duration = (finished - started) if started and finished else None
    write_junit(out_dir / "junit.xml", scenario.name, gate, duration)
    if html:
        from loadgen.report.html import write_html

        write_html(out_dir / "report.html", summary, stats, server, scenario.request.max_tokens)
    return summary
