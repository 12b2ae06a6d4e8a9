"""records.jsonl written line by line from plain dicts, then counted as a report counts it.

The judge reads records.jsonl as JSON objects (a public contract), so these tests write
the lines a run (or an older run, or a hand-edited file) would hold, fields missing
included, and read back what `dsv4-qual report DIR` would count: no server, no
subprocess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from loadgen.judge.gate.aggregate import RunStats, aggregate
from loadgen.judge.gate.run_report import rules_for
from loadgen.results import RECORDS_FILE
from loadgen.scenario import Scenario
from loadgen.taxonomy import DEFAULT_FAIL_ON

FAIL_ON = [v.value for v in DEFAULT_FAIL_ON]


def write_records(out: Path, records: list[dict[str, Any]]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / RECORDS_FILE).write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in records))
    return out


def counted(out: Path, records: list[dict[str, Any]], *, scenario: Scenario | None = None,
            fail_on: list[str] | None = None) -> RunStats:
    """The run's statistics with the run-level rules the scenario calls for."""
    scenario = scenario or Scenario(name="s")
    return aggregate(write_records(out, records), FAIL_ON if fail_on is None else fail_on,
                     rules_for(scenario))
