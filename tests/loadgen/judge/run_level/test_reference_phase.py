"""The reference phase: the same server alone is the oracle (through `dsv4-qual run`)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

SC = {"load": {"measurement": 12}, "request": {"max_tokens": 96},
      "gate": {"prove_below": 0.3}, "reference": {"requests": 3}}
PER_REQUEST = {"variant": "per-request", "accounts": 6}


def replay_file(tmp_path: Path, mode: str) -> dict:
    """Tool turns a workload knows no answer of: only the server alone can say."""
    lines = [orjson.dumps({"messages": [{"role": "user", "content": f"Hi, account Q{i}RST{i}."},
                                        {"role": "user", "content": "Move it to the pro plan."}],
                           "tools": [{"type": "function", "function": {
                               "name": "change_plan", "parameters": {
                                   "type": "object", "required": ["account_id", "plan"]}}}],
                           "fake_mode": mode}) for i in range(4)]
    path = tmp_path / "bodies.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return {"kind": "replay", "path": str(path)}


def run(tmp_path: Path, url: str, *, workload: dict = PER_REQUEST, reference: dict | None = None
        ) -> tuple[int, dict, list[dict], str]:
    sc = write_scenario(tmp_path / "s.toml", SC, workload=workload, reference=reference or {})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(out), "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    return proc.returncode, summary, records, proc.stdout + proc.stderr


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_healthy_server_agrees_with_itself(fake_server, tmp_path: Path, when: str) -> None:
    _, srv = fake_server(("ok",))
    code, summary, records, output = run(tmp_path, srv.url, reference={"when": when})
    assert code == 0, output
    reference = [r for r in records if r["phase"] == "reference"]
    assert len(reference) == 3
    assert [r["seq"] for r in reference] == [12, 13, 14]  # after the measured seqs, always
    order = [r["phase"] for r in records]
    assert (order[0] == "reference") == (when == "before")
    measured_items = {r["item_id"] for r in records if r["phase"] == "measurement"}
    assert {r["item_id"] for r in reference} <= measured_items
    ref = summary["reference"]
    assert ref["solo_replies"] == 3 and ref["verifiable_mismatches"] == 0
    assert ref["compared"] == 6  # 6 accounts over 12 measured: each sampled body twice
    assert ref["identical"] == ref["texts_compared"] == 6
    assert ref["similarity"]["min"] == 1.0
    assert "reference_mismatch" not in summary["phases"]["measurement"]["verdicts"]
    checks = {c["name"]: c for c in summary["gate"]["checks"]}
    acceptance = checks["spec-decode acceptance under load >= 0.5 x alone"]
    assert acceptance["passed"] and "ratio 1.00" in acceptance["message"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Reference phase: the same server alone" in report


def test_a_loaded_reply_unlike_its_solo_reply_fails(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server()
    code, summary, _, output = run(tmp_path, srv.url,
                                   workload=replay_file(tmp_path, "drift_under_load"))
    assert code == 1, output
    m = summary["phases"]["measurement"]
    assert m["verdicts"].get("reference_mismatch", 0) >= 3, m["verdicts"]
    assert "wrong_answer" not in m["verdicts"]  # the workload knew no answer
    derived = [json.loads(x) for x in (tmp_path / "out" / "run_level.jsonl").read_text()
               .splitlines()]
    finding = derived[0]["findings"]["reference_mismatch"]
    assert finding["field"] == "verifiable" and '"pro"' in finding["reference"]


def test_rewording_is_reported_and_gated_only_where_declared_batch_invariant(
        fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("reword_under_load",))
    code, summary, _, output = run(tmp_path, srv.url)
    assert code == 0, output
    ref = summary["reference"]
    assert ref["verifiable_mismatches"] == 0 and ref["identical"] < ref["texts_compared"]
    assert ref["similarity"]["min"] == 1.0  # the answer (the call) is the same...
    (tmp_path / "out").rename(tmp_path / "first")
    code, summary, _, output = run(tmp_path, srv.url, reference={"batch_invariant": True})
    assert code == 1, output  # ...but not word for word, which a batch-invariant server owes
    assert summary["phases"]["measurement"]["verdicts"].get("reference_mismatch", 0) >= 1


def test_spec_decode_acceptance_that_collapses_under_load_fails(fake_server,
                                                                tmp_path: Path) -> None:
    # Tokens a few ms apart, so the measured requests overlap as on a real server.
    fake, srv = fake_server(("ok",), token_delay_s=0.004)
    fake.accepted_under_load = 1  # 1 of 7 drafted tokens accepted with others in flight
    code, summary, _, output = run(tmp_path, srv.url)
    assert code == 1, output
    (check,) = [c for c in summary["gate"]["checks"] if c["name"].startswith("spec-decode")]
    assert not check["passed"] and "0.714 alone" in check["message"]
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 12}


@pytest.mark.parametrize(("engines", "collapsing"), [(2, 1), (3, 0), (4, 2)])
def test_one_collapsing_engine_behind_one_url_fails_by_name(fake_server, tmp_path: Path,
                                                            engines: int,
                                                            collapsing: int) -> None:
    """Data-parallel engines behind one URL, each its own label set on /metrics: one
    accepting 1 of 7 under load fails the gate, named, though the sum over the engines
    would keep more than half of the rate alone. The 12 measured requests are the loaded
    ones and the reference phase's come alone, by count: a busy machine that staggers
    the sends cannot make a measured request look alone."""
    fake, srv = fake_server(("ok",), token_delay_s=0.004)
    fake.engines, fake.collapsing_engine, fake.accepted_under_load = engines, collapsing, 1
    fake.loaded_requests = SC["load"]["measurement"]
    code, summary, _, output = run(tmp_path, srv.url)
    (check,) = [c for c in summary["gate"]["checks"] if c["name"].startswith("spec-decode")]
    assert code == 1, (output, check["message"], fake.engine_spec)
    assert not check["passed"]
    assert f"(engine={collapsing})" in check["message"], check["message"]
    assert "1 of " in check["message"] and "servers collapse under load" in check["message"]
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 12}


@pytest.mark.parametrize("engines", [2, 3])
def test_healthy_engines_behind_one_url_pass(fake_server, tmp_path: Path,
                                             engines: int) -> None:
    fake, srv = fake_server(("ok",), token_delay_s=0.004)
    fake.engines = engines
    code, summary, _, output = run(tmp_path, srv.url)
    assert code == 0, output
    (check,) = [c for c in summary["gate"]["checks"] if c["name"].startswith("spec-decode")]
    assert check["passed"] and "engine=" in check["message"], check["message"]


def test_without_a_reference_phase_there_is_no_acceptance_check(fake_server,
                                                                tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    sc = write_scenario(tmp_path / "s.toml", SC, workload=PER_REQUEST, reference={"requests": 0})
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "o"),
                   "--quiet")
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert proc.returncode == 0
    assert not any(c["name"].startswith("spec-decode") for c in summary["gate"]["checks"])
    assert summary["reference"] is None


def test_a_server_that_fails_alone_fails_the_gate(fake_server, tmp_path: Path) -> None:
    # Fine under load, stuck alone: its solo replies are no oracle, and they are failures
    # of this server all the same.
    _, srv = fake_server(("stuck_alone",))
    code, summary, records, output = run(tmp_path, srv.url, reference={"when": "after"})
    assert code == 1, output
    solo = [r for r in records if r["phase"] == "reference"]
    assert solo and all("stuck_in_reasoning" in r["verdicts"] for r in solo)
    checks = {c["name"]: c for c in summary["gate"]["checks"]}
    alone = checks["reference phase: the server alone fails <= 0"]
    assert not alone["passed"] and alone["message"].startswith(f"{len(solo)} of {len(solo)} "
                                                               "solo replies failed")
    assert not checks["reference phase: a usable oracle"]["passed"]


def test_a_reference_phase_without_any_oracle_is_invalid(fake_server, tmp_path: Path) -> None:
    # Every solo request gets HTTP 500 (under load all is well): nothing was compared
    # with the server alone, so the run proves nothing of what the phase promised.
    _, srv = fake_server(("error_alone",))
    code, summary, _, output = run(tmp_path, srv.url, reference={"when": "after"})
    assert code == 2, output
    checks = {c["name"]: c for c in summary["gate"]["checks"]}
    oracle = checks["reference phase: a usable oracle"]
    assert not oracle["passed"] and oracle["kind"] == "error"
    assert "none is usable" in oracle["message"]
