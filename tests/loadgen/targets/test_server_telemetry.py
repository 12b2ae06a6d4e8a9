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
from tests.support.receipts import parallel
from tests.support.scenario_files import write_scenario


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
    block = summarize({"samples": samples}).servers[s].to_dict()
    assert block["max_requests_running"] == 8 and block["max_kv_cache_usage"] == 0.7
    # 200 before the reset, 50 counted from zero after it, then 100 more.
    assert block["generation_tokens"] == 350
    assert block["spec_accepted_tokens"] == 100 and block["spec_draft_tokens"] == 180
    assert block["spec_acceptance_rate"] == pytest.approx(100 / 180)
    assert block["generation_tokens_per_s"] == pytest.approx(350 / 4)


def _metrics(server_id: str | None, start: float | None = None) -> str:
    text = "vllm:num_requests_running 0\n"
    if start is not None:
        text += f"process_start_time_seconds {start}\n"
    if server_id is not None:
        text += f'dsv4_qual_server_info{{server_id="{server_id}",address="0.0.0.0:8000"}} 1\n'
    return text


def _server_doc(ids: dict[str, tuple[str | None, str | None]], receipts: list[dict]) -> dict:
    """server.json as a run leaves it: each endpoint's /metrics before and after."""
    return {"servers": {url: {"metrics_before": None if before is False else _metrics(before),
                              "metrics_after": _metrics(after)}
                        for url, (before, after) in ids.items()},
            "receipts": receipts, "receipts_dir": "/r"}


def test_receipts_count_by_the_server_id_each_endpoint_exports() -> None:
    now = time.time()
    old = {"file": "host-11.json", "layout": "packed", "vllm_version": "0.27.1",
           "patched": True, "server": {"id": "yesterday"}, "time": iso(now - 60)}
    engine = {"file": "host-12.json", "layout": "capacity", "vllm_version": "0.28.0",
              "patched": True, "server": {"id": "today"}, "time": iso(now - 7200)}
    no_id = {"file": "host-13.json", "layout": "capacity", "patched": True,
             "time": iso(now)}
    doc = select_receipts(_server_doc({"http://s": ("today", "today")}, [old, engine, no_id]))
    sel = doc["receipts_selection"]
    # No clock: the receipt two hours old counts, the one a minute old does not.
    assert (sel["kept"], sel["ignored"]) == (1, 2)
    assert sel["endpoints"] == [{"base_url": "http://s", "server_ids": ["today"],
                                 "problem": None}]
    reasons = {a["file"]: a["reason"] for a in sel["set_aside"]}
    assert "server id yesterday is no measured endpoint's current start" in reasons[
        "host-11.json"]
    assert "names no server start" in reasons["host-13.json"]
    assert [r["endpoints"] for r in doc["receipts"] if r["counted"]] == [["http://s"]]
    assert doc["receipts_summary"]["layouts"] == ["capacity"]
    assert doc["c128a_layout"] == "capacity" and doc["c128a_layout_source"] == "patch receipts"
    assert len(doc["receipts"]) == 3  # all kept for forensics
    assert select_receipts(doc)["receipts_selection"] == sel  # idempotent

    # Two endpoints, each its own start: each one's receipts count, for it alone.
    doc = select_receipts(_server_doc({"http://a": ("today", "today"),
                                       "http://b": ("yesterday", "yesterday")},
                                      [old, engine]))
    assert doc["receipts_selection"]["kept"] == 2
    assert sorted(r["endpoints"][0] for r in doc["receipts"]) == ["http://a", "http://b"]

    # A restart during the run: both starts measured, both starts' receipts count.
    doc = select_receipts(_server_doc({"http://s": ("yesterday", "today")}, [old, engine]))
    assert doc["receipts_selection"]["kept"] == 2


@pytest.mark.parametrize("ids,words", [
    ((None, None), "exports no server id (dsv4_qual_server_info in /metrics)"),
    ((False, None), "exports no server id"),
    ((None, "today"), "exported no server id at the run's start"),
    (("today,yesterday", "today"), "exports several server ids at once"),
])
def test_an_endpoint_that_does_not_name_one_start_ties_no_receipt(ids, words) -> None:
    before, after = ids
    doc = _server_doc({"http://s": (before, after)}, [
        {"file": "host-12.json", "layout": "capacity", "server": {"id": "today"}}])
    if before == "today,yesterday":  # a multiprocess directory kept across restarts
        info = doc["servers"]["http://s"]
        info["metrics_before"] = _metrics("today") + _metrics("yesterday")
    doc = select_receipts(doc)
    (endpoint,) = doc["receipts_selection"]["endpoints"]
    assert words in endpoint["problem"]
    assert doc["receipts_selection"]["kept"] == 0


def test_run_reports_telemetry_layout_and_which_receipts_counted(fake_server,
                                                                 tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",), token_delay_s=0.003)
    receipts = tmp_path / "receipts"
    receipts.mkdir()
    (receipts / "gpu-1-100.json").write_text(json.dumps({
        "layout": "packed", "vllm_version": "0.27.1", "patched": True, "pid": 100,
        "server": {"id": "an-earlier-start"}}))
    (receipts / "gpu-1-200.json").write_text(json.dumps({
        "layout": "capacity", "vllm_version": "0.27.1", "patched": True, "pid": 200,
        "server": {"id": fake.server_id}, "guard": {"mode": "1", "calls": 90, "violations": 0},
        "model": {"loaded": True, "architectures": ["DeepseekV4ForCausalLM"],
                  "c128a_builders": 1, "parallel": parallel()}}))
    sc = write_scenario(tmp_path / "t.toml", load={"measurement": 24}, workload=None,
                        telemetry={"scrape_interval_s": 0.05}, gate={"require_receipts": True})
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
    assert "1 receipt(s) set aside" in md and "no measured endpoint's current start" in md
    assert "## Server telemetry (/metrics)" in md and "71.4% (120 of 168 drafted)" in md
    html = (out / "report.html").read_text()
    for title in ("Server load over time", "KV-cache usage over time", "Throughput over time",
                  "Speculative decoding acceptance over time", "Preemptions"):
        assert f'alt="{title}' in html, title
    assert 'id="layout">capacity (from patch receipts)' in html
