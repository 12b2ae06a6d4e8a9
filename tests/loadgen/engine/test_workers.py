"""`--workers N` shards a phase over processes without changing what is measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.workload.tool_turn import account_ids
from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

#: `--workers` starts worker processes: the slow tier (end-to-end through real processes).
pytestmark = pytest.mark.slow

SC = {"load": {"concurrency": 6, "priming": 6, "measurement": 30},
      "request": {"max_tokens": 40}, "workload": {"accounts": 5, "seed": 3},
      "gate": {"min_measured": 30}}


def test_workers_give_the_same_records_as_one_process(fake_server, tmp_path: Path) -> None:
    accounts = account_ids(3, 5)
    # Each account's body always gets the same reply, whoever sends it.
    modes = {accounts[1]: "stuck", accounts[3]: "leak", accounts[4]: "empty"}
    fake, srv = fake_server(("ok",), mode_by_text=modes)
    sc = write_scenario(tmp_path / "w.toml", SC)
    by_workers = {}
    for workers in (1, 3):
        out = tmp_path / f"out{workers}"
        proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet",
                       "--workers", str(workers))
        assert proc.returncode == 1, proc.stderr
        records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        by_workers[workers] = {r["seq"]: (r["item_id"], r["verdicts"], r["phase"])
                               for r in records}
        summary = json.loads((out / "summary.json").read_text())
        by_workers[f"summary{workers}"] = summary["phases"]
        if workers == 3:
            assert summary["client"]["workers"] == 3
            assert {r["worker"] for r in records} == {0, 1, 2}
            assert max(r["in_flight"] for r in records) <= 6
    assert sorted(by_workers[1]) == list(range(36))
    assert by_workers[1] == by_workers[3]
    for phase in ("priming", "measurement"):
        assert by_workers["summary1"][phase]["verdicts"] == \
            by_workers["summary3"][phase]["verdicts"]
    assert by_workers["summary1"]["measurement"]["verdicts"]["stuck_in_reasoning"] == 6
    assert sum(fake.counts.values()) == 72


def test_the_reference_phase_runs_alone_in_the_parent_whatever_the_workers(
        fake_server, tmp_path: Path) -> None:
    # Sharded phases, then the reference phase one request at a time: the same records.
    _, srv = fake_server(("ok",))
    sc = write_scenario(tmp_path / "w.toml", SC, reference={"requests": 3, "when": "after"})
    seen = {}
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet",
                       "--workers", str(workers))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        reference = [r for r in records if r["phase"] == "reference"]
        assert [r["seq"] for r in reference] == [36, 37, 38]
        assert all(r["in_flight"] == 1 for r in reference)
        seen[workers] = [r["item_id"] for r in reference]
        assert json.loads((out / "summary.json").read_text())["reference"]["oracles"] == 3
    assert seen[1] == seen[2]


def test_workers_stop_a_phase_whose_errors_are_over_the_limit(fake_server,
                                                              tmp_path: Path) -> None:
    fake, srv = fake_server(("http_500",))
    sc = write_scenario(tmp_path / "w.toml", SC, load={"priming": 0, "measurement": 400},
                        gate={"min_measured": 400})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet",
                   "--workers", "2")
    assert proc.returncode == 2, proc.stdout
    assert "measurement stopped early" in proc.stdout and "HTTP 500" in proc.stdout
    assert sum(fake.counts.values()) < 50  # of 400 planned: each worker stopped at once
