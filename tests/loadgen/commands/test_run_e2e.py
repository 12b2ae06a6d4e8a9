"""`dsv4-qual run` end to end against a real fake server: verdicts, reports, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.loadgen.conftest import REPO, run_cli

SMOKE = str(REPO / "scenarios" / "smoke.toml")


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_clean_candidate_passes_with_every_report(fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",))
    out = tmp_path / "run"
    proc = run_cli("run", SMOKE, "--base-url", srv.url, "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("records.jsonl", "summary.json", "report.md", "junit.xml", "report.html",
                 "server.json", "run.json"):
        assert (out / name).is_file(), name
    s = _summary(out)
    assert s["phases"]["measurement"]["requests"] == 32
    assert s["phases"]["priming"]["requests"] == 8
    assert s["phases"]["measurement"]["verdicts"] == {"ok": 32}
    assert s["gate"]["passed"] is True
    assert 0.08 < s["gate"]["upper_bound_95"] < 0.09  # 0 of 32 -> < 8.9%
    lines = (out / "records.jsonl").read_text().splitlines()
    assert len(lines) == 40
    rec = json.loads(lines[-1])
    assert rec["tool_calls"][0]["function"]["name"] == "change_plan"
    # The smoke turn asks each request for its own account and plan: the fake reads them.
    args = json.loads(rec["tool_calls"][0]["function"]["arguments"])
    assert args == {key: rec["expected"]["facts"][key] for key in ("account_id", "plan")}
    assert rec["finish_reason"] == "tool_calls"
    assert rec["usage"]["reasoning_tokens"] > 0
    assert fake.counts["ok"] == 40


def test_stuck_candidate_fails_gate(fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server(("ok", "ok", "ok", "stuck"))
    out = tmp_path / "run"
    proc = run_cli("run", SMOKE, "--base-url", srv.url, "--out", str(out), "--quiet",
                   "--max-tokens", "64", "--accept-weaker-load")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert fake.counts == {"ok": 30, "stuck": 10}
    s = _summary(out)
    m = s["phases"]["measurement"]
    assert m["verdicts"]["stuck_in_reasoning"] == 8
    assert s["gate"]["failures"] == 8
    assert "GATE FAILED" in (out / "report.md").read_text()
