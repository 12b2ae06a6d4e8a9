"""Judged runs built in-process, for the renderers' and the gate's own tests.

A results directory is written the way a run writes it (run.json, records.jsonl,
server.json), then judged; no server, no subprocess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadgen.judge.gate.run_report import RunReport, judge_run
from loadgen.records import RecordWriter, RequestRecord
from loadgen.results import RECORDS_FILE, write_run, write_server
from loadgen.run_facts import RunFacts
from loadgen.scenario import Scenario


def record(seq: int, *, phase: str = "measurement", verdicts: list[str] | None = None,
           **fields: Any) -> RequestRecord:
    base: dict[str, Any] = dict(run_id="r", scenario="s", phase=phase, seq=seq,
                                endpoint="http://127.0.0.1:1", item_id=f"i{seq}", status=200,
                                finish_reason="tool_calls", verdicts=verdicts or ["ok"])
    base.update(fields)
    rec = RequestRecord(**base)
    rec.timings.sent = 1_700_000_000.0 + seq
    rec.timings.end = 0.5
    return rec


def write_run_dir(out: Path, records: list[RequestRecord], *,
                  scenario: Scenario | None = None, facts: RunFacts | None = None,
                  server: dict[str, Any] | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    scenario = scenario or Scenario(name="s")
    facts = facts or RunFacts(run_id="r", scenario=scenario.name,
                              base_urls=["http://127.0.0.1:1"], model="m",
                              started=1_700_000_000.0, finished=1_700_000_100.0,
                              phases_done=["priming", "measurement"])
    write_run(out, scenario, facts)
    with RecordWriter(out / RECORDS_FILE) as writer:
        for rec in records:
            writer.write(rec)
    if server is not None:
        write_server(out, server)
    return out


def judged(out: Path, records: list[RequestRecord], **kwargs: Any) -> RunReport:
    return judge_run(write_run_dir(out, records, **kwargs))
