"""`dsv4-qual fleet DB`: did this release pass on every node in the window?

Reads the fleet's history (the PostgreSQL URL every node writes to, or a SQLite file),
or a folder of qualifications (each node's qualify.json), judges each node on its last
finished round (`loadgen.fleet.verdict`), prints the table and the statement, and
writes the JSON, Markdown and JUnit a scheduler's CI shows.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import orjson

from loadgen.durations import parse_duration
from loadgen.exit_codes import BadInputError, ExitCode
from loadgen.files import write_atomic
from loadgen.fleet.documents import fleet_json, fleet_junit, fleet_markdown, fleet_table
from loadgen.fleet.qualifications import qualification_rows
from loadgen.fleet.verdict import FleetVerdict, judge_fleet
from loadgen.history import History
from loadgen.history.pooling import filter_rounds, unknown_filter
from loadgen.report.trend import console
from loadgen.scenario import shipped_scenarios


def parse_since(text: str, now: float) -> float:
    """A duration back from now (`12h`) or a moment (`2026-12-04T00:00:00Z`)."""
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInputError(f"--since {text!r} is neither a duration (12h, 90m) nor a "
                            "moment (2026-12-04T00:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def read_nodes(names: tuple[str, ...], nodes_file: Path | None) -> list[str] | None:
    """The nodes named on the command line (comma lists too) and in a file, one a line
    (`scontrol show hostnames "$SLURM_JOB_NODELIST" > nodes.txt`); None: none named."""
    named = [n.strip() for text in names for n in text.split(",") if n.strip()]
    if nodes_file is not None:
        try:
            lines = nodes_file.read_text().splitlines()
        except OSError as exc:
            raise BadInputError(f"--nodes-file {nodes_file}: {exc.strerror or exc}") from None
        named += [line.strip() for line in lines
                  if line.strip() and not line.lstrip().startswith("#")]
        if not named:
            raise BadInputError(f"--nodes-file {nodes_file} names no node")
    return named or None


def fleet_verdict(db: str, *, scenario: str | None, since: str, lookback: str,
                  nodes: list[str] | None, filters: dict[str, str]) -> FleetVerdict:
    now = time.time()
    start = parse_since(since, now)
    try:
        back = parse_duration(lookback)
    except ValueError as exc:
        raise BadInputError(f"--lookback: {exc}") from None
    if Path(db).is_dir():
        everything = qualification_rows(Path(db))
    else:
        store = History(db, create=False)
        try:
            everything = store.all_rounds()
        finally:
            store.close()
    problem = unknown_filter(everything, {"scenario": scenario, **filters},
                             {"scenario": shipped_scenarios()})
    if problem is not None and problem[1]:  # a typo; anything else: nobody reported it
        raise BadInputError(problem[0])
    rows = filter_rounds([r for r in everything
                          if scenario is None or r.scenario in (scenario, None)], filters)
    seen = {str(r.host or "unknown") for r in rows if start - back <= (r.started or 0.0) < start}
    return judge_fleet(rows, since=start, until=now, expected=nodes, seen_before=seen,
                       scenario=scenario, filters=filters)


def write_documents(verdict: FleetVerdict, *, json_path: Path | None,
                    markdown_path: Path | None, junit_path: Path | None) -> None:
    for path, data in ((json_path, orjson.dumps(fleet_json(verdict),
                                                option=orjson.OPT_INDENT_2)),
                       (markdown_path, fleet_markdown(verdict).encode()),
                       (junit_path, fleet_junit(verdict))):
        if path is None:
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        except OSError as exc:
            raise BadInputError(f"cannot write {path}: {exc.strerror or exc}") from None


def show(verdict: FleetVerdict, as_json: bool) -> ExitCode:
    if as_json:
        print(orjson.dumps(fleet_json(verdict), option=orjson.OPT_INDENT_2).decode())
    else:
        console().print(fleet_table(verdict))
    return verdict.exit_code
