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

from pathlib import Path

from loadgen.exit_codes import BadInputError, ExitCode
from loadgen.history.rows import RoundRow
from loadgen.history.statuses import RoundStatus
from loadgen.results.directory import QUALIFY_FILE
from loadgen.results.qualification import QualificationFile, parse_qualification


def _row(path: Path, doc: QualificationFile) -> RoundRow:
    code = doc.exit_code
    candidate, control = doc.candidate, doc.control
    return RoundRow(
        host=doc.node,
        started=doc.started or path.stat().st_mtime,
        ended=doc.finished,
        status=RoundStatus.PARTIAL if code == ExitCode.INTERRUPTED else RoundStatus.COMPLETE,
        exit_code=code,
        scenario=doc.scenario,
        soak_id="qualify", round=path.parent.name,
        results_dir=str(path.parent),
        verdict_line=doc.headline or doc.verdict,
        vllm_version=(candidate.vllm_release if candidate else None) or control.vllm_release,
        c128a_layout=candidate.layout if candidate else None,
        measured=candidate.measured if candidate else None,
        gated_failures=candidate.failures if candidate else None,
    )


def qualification_rows(root: Path) -> list[RoundRow]:
    """One row per qualify.json below `root`, oldest first."""
    rows = []
    for path in sorted(root.rglob(QUALIFY_FILE)):
        try:
            rows.append(_row(path, parse_qualification(path)))
        except (OSError, ValueError, BadInputError) as exc:
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
