"""Qualifications across nodes: each node's qualify.json, read as one round of it.

A fleet qualifies a release by running `dsv4-qual qualify` on every node, its reports
into one shared folder (each under its own directory). `dsv4-qual fleet DIR` reads
every qualify.json below DIR as the node's round (its node, when it started, its exit
code and headline), so the same verdict rules hold: a node passes on its last
qualification in the window being QUALIFIED; NOT QUALIFIED, NOT PROVEN, an interrupted
qualification or none at all is that node's failure. A qualify.json that cannot be
read is a failure too, named by its folder: it is never skipped into a pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadgen.exit_codes import ExitCode
from loadgen.history.rows import RoundRow
from loadgen.history.statuses import RoundStatus

QUALIFY_FILE = "qualify.json"


def _row(path: Path, doc: dict[str, Any]) -> RoundRow:
    code = doc.get("exit_code")
    candidate = doc.get("candidate") or {}
    control = doc.get("control") or {}
    return RoundRow(
        host=doc.get("node"),
        started=doc.get("started") or path.stat().st_mtime,
        ended=doc.get("finished"),
        status=RoundStatus.PARTIAL if code == ExitCode.INTERRUPTED else RoundStatus.COMPLETE,
        exit_code=code,
        scenario=doc.get("scenario"),
        soak_id="qualify", round=path.parent.name,
        results_dir=str(path.parent),
        verdict_line=doc.get("headline") or doc.get("verdict"),
        vllm_version=candidate.get("vllm_release") or control.get("vllm_release"),
        c128a_layout=candidate.get("layout"),
        measured=candidate.get("measured"),
        gated_failures=candidate.get("failures"),
    )


def qualification_rows(root: Path) -> list[RoundRow]:
    """One row per qualify.json below `root`, oldest first."""
    rows = []
    for path in sorted(root.rglob(QUALIFY_FILE)):
        try:
            doc = json.loads(path.read_text())
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            rows.append(_row(path, doc))
        except (OSError, ValueError) as exc:
            rows.append(RoundRow(host=path.parent.name, started=_mtime(path),
                                 status=RoundStatus.COMPLETE, exit_code=None,
                                 soak_id="qualify", round=path.parent.name,
                                 results_dir=str(path.parent),
                                 note=f"{QUALIFY_FILE} unreadable: {exc}"))
    return sorted(rows, key=lambda r: r.started or 0.0)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
