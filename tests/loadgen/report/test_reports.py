"""The results directory: server.json telemetry, markdown forensics, junit, html, progress."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from loadgen.engine.progress import Progress
from loadgen.targets.receipts import receipts_summary
from loadgen.targets.telemetry import parse_prometheus, tracked
from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

SC = {"load": {"priming": 4, "measurement": 12}, "request": {"max_tokens": 48},
      "telemetry": {"scrape_interval_s": 0.05}}


def run(tmp_path: Path, srv, *extra: str) -> tuple[int, Path]:
    sc = write_scenario(tmp_path / "r.toml", SC)
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet", *extra)
    return proc.returncode, out


def test_server_json_and_reports(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok", "ok", "stuck"), token_delay_s=0.002)
    code, out = run(tmp_path, srv)
    assert code == 1
    server = json.loads((out / "server.json").read_text())
    info = server["servers"][srv.url]
    assert info["models"]["data"][0]["id"] == "fake-dsv4"
    assert info["version"] == {"version": "0.0.0-fake"}
    assert "vllm:num_requests_running" in info["metrics_before"]
    assert info["tracked_after"]["generation_tokens"] > info["tracked_before"]["generation_tokens"]
    assert server["samples"], "periodic /metrics samples during the run"

    md = (out / "report.md").read_text()
    assert "## First failures (measurement)" in md or "## First failures (priming)" in md
    assert "Wait, the user wants to upgrade XEHM4B to business, then cancel it." in md
    assert "| stuck_in_reasoning |" in md

    root = ET.parse(out / "junit.xml").getroot()
    suite = root.find("testsuite")
    # the gate, and the three gated verdicts the stuck replies carry (a stuck tool turn
    # has no tool call either)
    assert suite.get("failures") == "4"
    names = {c.get("name"): c for c in suite.iter("testcase")}
    assert names["failures <= 0"].find("failure") is not None
    assert names["verdict stuck_in_reasoning"].find("failure") is not None
    assert names["verdict reasoning_loop"].find("failure") is not None
    assert names["verdict no_tool_call"].find("failure") is not None
    assert names["verdict token_leak"].find("failure") is None
    assert "verdict divergent" not in names  # opt-in only

    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 4
    assert "Wait, the user wants" in html
    summary = json.loads((out / "summary.json").read_text())
    m = summary["phases"]["measurement"]
    assert m["verdicts"]["stuck_in_reasoning"] == 4
    assert m["finish_reasons"] == {"length": 4, "tool_calls": 8}
    assert m["latency_s"]["ttft"]["p50"] > 0
    assert summary["client"]["cpu_ms_per_request"] > 0


def test_prometheus_parsing_and_receipts_summary() -> None:
    text = ("# HELP x\nvllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3\n"
            "vllm:num_requests_running{model_name=\"m\",engine=\"1\"} 2\n"
            "vllm:kv_cache_usage_perc 0.5\nvllm:spec_decode_num_accepted_tokens_total 70\n"
            "vllm:spec_decode_num_draft_tokens_total 100\nbad line\nfoo NaN\n")
    sums = parse_prometheus(text)
    assert tracked(sums) == {"requests_running": 5.0, "kv_cache_usage": 0.5,
                             "spec_accepted_tokens": 70.0, "spec_draft_tokens": 100.0}
    s = receipts_summary([
        {"layout": "capacity", "vllm_version": "0.27.1", "patched": True,
         "guard": {"calls": 10, "violations": 0}},
        {"layout": "capacity", "vllm_version": "0.27.1", "patched": True,
         "guard": {"calls": 5, "violations": 2, "first_violation": {"row_stride": 128}}},
    ])
    assert s["count"] == 2 and s["layouts"] == ["capacity"] and s["patched"] is True
    assert s["guard_calls"] == 15 and s["stride_violations"] == 2
    assert s["first_violation"] == {"row_stride": 128}


def test_progress_falls_back_to_plain_lines() -> None:
    buf = io.StringIO()
    p = Progress(stream=buf, plain_interval_s=0)
    assert p.live_mode is False
    p.start_phase("measurement", 3)
    p.update(["ok"], 10)
    p.update(["stuck_in_reasoning", "truncated"], 64)
    p.end_phase()
    p.close()
    text = buf.getvalue()
    assert "measurement: 3 requests" in text
    assert "2/3 done" in text and "stuck_in_reasoning=1" in text
    assert "\x1b[" not in text


def test_divergent_is_stored_beside_the_records_it_concerns(fake_server, tmp_path: Path) -> None:
    # Identical greedy tool turns; every fourth reply finishes differently.
    _, srv = fake_server(("ok", "ok", "ok", "truncated"))
    # The odd one out is cut by length: accepted here by name, so only divergent is at stake.
    sc = write_scenario(tmp_path / "d.toml", SC, load={"concurrency": 1, "priming": 0},
                        gate={"ignore": ["truncated"]})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stdout  # divergent is reported, not gated by default
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    # records.jsonl keeps each reply's own verdicts; run_level.jsonl says what the run
    # added, with the record's final verdicts.
    assert not any("divergent" in r["verdicts"] for r in records)
    derived = [json.loads(x) for x in (out / "run_level.jsonl").read_text().splitlines()]
    divergent = [d["seq"] for d in derived if "divergent" in d["verdicts"]]
    assert divergent == [3, 7, 11]
    assert all(d["verdicts"] == ["truncated", "divergent"] and d["run_level"] == ["divergent"]
               for d in derived)
    summary = json.loads((out / "summary.json").read_text())
    m = summary["phases"]["measurement"]
    assert m["verdicts"]["divergent"] == 3 and m["run_level_verdicts"] == ["divergent"]
    assert summary["divergent_seqs"] == divergent
    assert summary["run_level"]["added"] == {"measurement": {"divergent": 3}}
    # Rebuilding derives the same file again and never touches the records.
    before = (out / "records.jsonl").read_bytes(), (out / "run_level.jsonl").read_bytes()
    mtime = (out / "records.jsonl").stat().st_mtime_ns
    assert run_cli("report", str(out)).returncode == 0
    assert (out / "records.jsonl").stat().st_mtime_ns == mtime
    assert ((out / "records.jsonl").read_bytes(), (out / "run_level.jsonl").read_bytes()) \
        == before


def test_records_from_before_run_level_storage_are_judged_anew(fake_server,
                                                               tmp_path: Path) -> None:
    # Older versions wrote `divergent` into records.jsonl itself; such a record is counted
    # by what the rule finds now, not twice and not stale.
    _, srv = fake_server(("ok", "ok", "ok", "truncated"))
    # The odd one out is cut by length: accepted here by name, so only divergent is at stake.
    sc = write_scenario(tmp_path / "d.toml", SC, load={"concurrency": 1, "priming": 0},
                        gate={"ignore": ["truncated"]})
    out = tmp_path / "out"
    run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    for r in lines:  # as an older version left them: divergent on the wrong records
        r["verdicts"] = [*r["verdicts"], "divergent"] if r["seq"] == 0 else r["verdicts"]
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert run_cli("report", str(out)).returncode == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["divergent_seqs"] == [3, 7, 11]
    assert summary["phases"]["measurement"]["verdicts"]["divergent"] == 3
