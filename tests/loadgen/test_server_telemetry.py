"""Server telemetry: rates from /metrics counters, and receipts of the current server start."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loadgen.targets.epochs import select_receipts
from loadgen.targets.telemetry_summary import intervals, summarize
from tests.loadgen.conftest import run_cli


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def test_rates_come_from_counter_deltas_and_a_reset_is_not_a_rate() -> None:
    s = "http://s"
    samples = [
        {"t": 0.0, "server": s, "generation_tokens": 0, "prompt_tokens": 0,
         "spec_accepted_tokens": 0, "spec_draft_tokens": 0, "preemptions": 0,
         "requests_running": 0, "kv_cache_usage": 0.1},
        {"t": 2.0, "server": s, "generation_tokens": 200, "prompt_tokens": 1000,
         "spec_accepted_tokens": 60, "spec_draft_tokens": 100, "preemptions": 1,
         "requests_running": 8, "kv_cache_usage": 0.7},
        # the server restarted: counters start again from zero
        {"t": 3.0, "server": s, "generation_tokens": 50, "prompt_tokens": 100,
         "spec_accepted_tokens": 10, "spec_draft_tokens": 40, "preemptions": 0,
         "requests_running": 3, "kv_cache_usage": 0.2},
        {"t": 4.0, "server": s, "generation_tokens": 150, "prompt_tokens": 100,
         "spec_accepted_tokens": 40, "spec_draft_tokens": 80, "preemptions": 0,
         "requests_running": 2, "kv_cache_usage": 0.2},
    ]
    ivs = intervals(samples)
    assert [iv.generation_tps for iv in ivs] == [100.0, None, 100.0]
    assert [iv.spec_acceptance for iv in ivs] == [0.6, None, 0.75]
    assert ivs[0].prompt_tps == 500.0 and ivs[0].preemptions == 1
    block = summarize({"samples": samples})["servers"][s]
    assert block["max_requests_running"] == 8 and block["max_kv_cache_usage"] == 0.7
    # 200 before the reset, 50 counted from zero after it, then 100 more.
    assert block["generation_tokens"] == 350
    assert block["spec_accepted_tokens"] == 100 and block["spec_draft_tokens"] == 180
    assert block["spec_acceptance_rate"] == pytest.approx(100 / 180)
    assert block["generation_tokens_per_s"] == pytest.approx(350 / 4)


def _server_doc(start: float | None, receipts: list[dict]) -> dict:
    metrics = "vllm:num_requests_running 0\n"
    if start is not None:
        metrics += f"process_start_time_seconds {start}\n"
    return {"servers": {"http://s": {"metrics_before": metrics, "metrics_after": metrics}},
            "receipts": receipts, "receipts_dir": "/r"}


def test_only_receipts_of_the_current_server_start_count() -> None:
    now = time.time()
    start = now - 7200  # up for two hours
    old = {"file": "host-11.json", "layout": "packed", "vllm_version": "0.27.1",
           "patched": True, "time": iso(start - 86400)}
    engine = {"file": "host-12.json", "layout": "capacity", "vllm_version": "0.28.0",
              "patched": True, "time": iso(start - 30)}  # engine started just before the API
    worker = {"file": "host-13.json", "layout": "capacity", "vllm_version": "0.28.0",
              "patched": True, "time": iso(start + 90)}
    doc = select_receipts(_server_doc(start, [old, engine, worker]), margin_s=600,
                          since=None, run_started=now)
    sel = doc["receipts_selection"]
    assert sel["process_start_time"] == start and "process start time" in sel["basis"]
    assert (sel["kept"], sel["ignored"], sel["ignored_files"]) == (2, 1, ["host-11.json"])
    assert doc["receipts_summary"]["layouts"] == ["capacity"]
    assert doc["receipts_summary"]["vllm_versions"] == ["0.28.0"]
    assert doc["c128a_layout"] == "capacity" and doc["c128a_layout_source"] == "patch receipts"
    assert len(doc["receipts"]) == 3  # all kept for forensics

    # No process start time: the run's start minus the margin (the server's own
    # two-hour-old receipts no longer count: the safe side for a candidate gate).
    doc = select_receipts(_server_doc(None, [old, engine, worker]), margin_s=600,
                          since=None, run_started=now)
    assert "the run's start minus 600 s" in doc["receipts_selection"]["basis"]
    assert doc["receipts_selection"]["kept"] == 0 and doc["c128a_layout"] is None

    # An explicit bound (what a soak passes for a server without the metric).
    doc = select_receipts(_server_doc(None, [old, engine, worker]), margin_s=600,
                          since=start - 60, run_started=now)
    assert doc["receipts_selection"]["basis"] == "telemetry.receipts_since"
    assert doc["receipts_summary"]["count"] == 2


def test_run_reports_telemetry_layout_and_which_receipts_counted(fake_server,
                                                                 tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",), token_delay_s=0.003)
    receipts = tmp_path / "receipts"
    receipts.mkdir()
    (receipts / "gpu-1-100.json").write_text(json.dumps({
        "layout": "packed", "vllm_version": "0.27.1", "patched": True, "pid": 100,
        "time": iso(fake.start_time - 3 * 86400)}))
    (receipts / "gpu-1-200.json").write_text(json.dumps({
        "layout": "capacity", "vllm_version": "0.27.1", "patched": True, "pid": 200,
        "time": iso(fake.start_time + 5), "guard": {"mode": "1", "calls": 90, "violations": 0},
        "model": {"loaded": True, "architectures": ["DeepseekV4ForCausalLM"],
                  "c128a_builders": 1}}))
    sc = tmp_path / "t.toml"
    sc.write_text("[load]\nconcurrency = 4\npriming = 0\nmeasurement = 24\n"
                  "[request]\nmax_tokens = 64\n[telemetry]\nscrape_interval_s = 0.05\n"
                  "[gate]\nprove_below = 0.9\nrequire_receipts = true\n")
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--receipts-dir", str(receipts),
                   "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    server = json.loads((out / "server.json").read_text())
    assert server["receipts_selection"]["ignored_files"] == ["gpu-1-100.json"]
    assert server["c128a_layout"] == "capacity"
    labels = [s.get("label") for s in server["samples"]]
    assert labels[0] == "before" and labels[-1] == "after" and None in labels
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"]["c128a_layout"] == "capacity"
    total = summary["telemetry"]["total"]
    # The fake drafts 7 tokens a request and accepts 5 of them.
    assert total["spec_acceptance_rate"] == pytest.approx(5 / 7)
    assert total["spec_draft_tokens"] == 7 * 24
    assert total["generation_tokens"] == 10 * 24
    md = (out / "report.md").read_text()
    assert "| C128A layout | capacity (from patch receipts) |" in md
    assert "1 older receipt(s) ignored" in md and "process start time" in md
    assert "## Server telemetry (/metrics)" in md and "71.4% (120 of 168 drafted)" in md
    html = (out / "report.html").read_text()
    for title in ("Server load over time", "KV-cache usage over time", "Throughput over time",
                  "Speculative decoding acceptance over time", "Preemptions"):
        assert f'alt="{title}' in html, title
    assert 'id="layout">capacity (from patch receipts)' in html
