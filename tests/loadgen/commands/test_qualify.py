"""`dsv4-qual qualify`: a control that must reproduce, then the candidate; one verdict."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from loadgen.commands.qualify import side_scenario, with_sides
from loadgen.scenario import Role, load_scenario
from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

SC = {"load": {"priming": 2}, "workload": {"accounts": 64}, "gate": {"min_measured": 1},
      "telemetry": {"scrape_interval_s": 0.05}}


def scenario(tmp_path: Path, ready: float = 30, *layers: dict, **tables: Any) -> Path:
    return write_scenario(tmp_path / "q.toml", SC, {"target": {"ready_timeout_s": ready}},
                          *layers, **tables)


def qualify(tmp_path: Path, sc: Path, *args: str):
    out = tmp_path / "qual"
    proc = run_cli("qualify", str(sc), "--out", str(out), "--quiet", *args)
    doc_file = out / "qualify.json"
    doc = json.loads(doc_file.read_text()) if doc_file.exists() else None
    return proc, out, doc


def test_control_that_does_not_reproduce_is_invalid_and_the_candidate_never_runs(
        fake_server, tmp_path: Path) -> None:
    control, c = fake_server(("ok",))
    candidate, k = fake_server(("ok",))
    proc, out, doc = qualify(tmp_path, scenario(tmp_path), "--control", c.url,
                             "--candidate", k.url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot see the bug in this setup" in proc.stdout
    assert "a clean candidate would prove nothing" in proc.stdout
    assert sum(control.counts.values()) == 10
    assert sum(candidate.counts.values()) == 0, "the candidate must not be run"
    assert doc["verdict"] == "INVALID" and doc["exit_code"] == 2 and doc["candidate"] is None
    assert doc["control"]["failures"] == 0 and doc["control"]["measured"] == 8
    assert not (out / "candidate").exists()
    assert "candidate: not run" in (out / "report.md").read_text()
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["control reproduces the bug"].find("error") is not None
    assert cases["candidate stays within its gate"].find("skipped") is not None


def test_control_reproduces_and_clean_candidate_qualifies(fake_server, tmp_path: Path) -> None:
    _, c = fake_server(("ok", "stuck"))
    candidate, k = fake_server(("ok",))
    # Both targets from the scenario's [qualify] section this time.
    sc = scenario(tmp_path, qualify={"control": {"base_urls": [c.url]},
                                     "candidate": {"base_urls": [k.url]}})
    proc, out, doc = qualify(tmp_path, sc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["verdict"] == "QUALIFIED" and doc["passed"] is True
    # The control's gate is the #52448 signature, role control; 4 of 8 measured stuck.
    assert doc["control"]["role"] == "control"
    assert doc["control"]["fail_on"] == ["stuck_in_reasoning"]
    assert doc["control"]["failures"] == 4 and doc["control_reproduction_rate"] == 0.5
    assert 0.15 < doc["control_lower_bound_95"] < 0.25
    # The candidate's clean run: 0 of 8 -> < 31.2% at 95%.
    assert doc["candidate"]["failures"] == 0
    assert 0.31 < doc["candidate_upper_bound_95"] < 0.32
    assert doc["candidate_bound"].startswith("0 of 8 failed: failure rate < 31.23%")
    assert sum(candidate.counts.values()) == 10
    for side in ("control", "candidate"):
        summary = json.loads((out / side / "summary.json").read_text())
        assert summary["gate"]["role"] == side
        assert (out / side / "report.html").is_file()
    md = (out / "report.md").read_text()
    assert "| gated failures | 4 | 0 |" in md
    assert "| stuck_in_reasoning | 4 | 0 |" in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3
    assert 'href="control/report.html"' in html and 'href="candidate/report.html"' in html
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite.get("failures") == "0" and suite.get("errors") == "0"


def test_a_clean_candidate_beside_a_rare_reproduction_is_not_proven(fake_server,
                                                                    tmp_path: Path) -> None:
    # One stuck reply of 8 on the control, none on the candidate: a candidate as broken
    # as the control scores 0 of 8 more often than not. The qualification says which
    # test decided, and how many requests would settle it.
    _, c = fake_server(("ok",) * 7 + ("stuck",))
    _, k = fake_server(("ok",))
    proc, out, doc = qualify(tmp_path, scenario(tmp_path), "--control", c.url,
                             "--candidate", k.url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert doc["verdict"] == "NOT PROVEN" and doc["control"]["failures"] == 1
    assert doc["candidate"]["failures"] == 0 and doc["candidate"]["exit_code"] == 0
    tested = doc["difference"]
    assert tested["test"] == "Fisher's exact test, one-sided" and not tested["proven"]
    assert tested["p_value"] == 0.5 and tested["per_side_needed"] > 8
    assert doc["reasons"] == [tested["sentence"]]
    md = (out / "report.md").read_text()
    assert "| difference (candidate below control) | Fisher's exact test, one-sided | " \
           "p = 0.5: NOT PROVEN" in md
    assert 'id="difference"' in (out / "report.html").read_text()
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    case = cases["candidate fails less often than the control (Fisher's exact test, "
                 "one-sided)"]
    assert case.find("error") is not None
    assert cases["candidate stays within its gate"].find("failure") is None


def test_candidate_that_fails_its_gate_fails_the_qualification(fake_server,
                                                               tmp_path: Path) -> None:
    _, c = fake_server(("ok", "stuck"))
    _, k = fake_server(("ok", "ok", "ok", "empty"))
    proc, out, doc = qualify(tmp_path, scenario(tmp_path), "--control", c.url,
                             "--candidate", k.url)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert doc["verdict"] == "NOT QUALIFIED"
    assert doc["candidate"]["failures"] == 2
    assert doc["candidate"]["verdicts"]["empty_content"] == 2
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["control reproduces the bug"].find("error") is None
    assert cases["candidate stays within its gate"].find("failure") is not None


def test_unreachable_control_is_invalid(fake_server, tmp_path: Path) -> None:
    candidate, k = fake_server(("ok",))
    proc, _, doc = qualify(tmp_path, scenario(tmp_path, ready=1), "--control",
                           "http://127.0.0.1:9", "--candidate", k.url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert doc["reasons"][0].startswith("the control run is invalid: ")
    assert sum(candidate.counts.values()) == 0


def test_missing_side_is_bad_input_before_anything_is_sent(fake_server, tmp_path: Path) -> None:
    control, c = fake_server(("stuck",))
    proc, out, _ = qualify(tmp_path, scenario(tmp_path), "--control", c.url)
    assert proc.returncode == 3
    assert "qualify needs a candidate target" in proc.stderr
    assert sum(control.counts.values()) == 0 and not out.exists()
    assert "Traceback" not in proc.stderr


def test_each_side_runs_the_scenario_with_its_own_target_and_gate(tmp_path: Path) -> None:
    path = scenario(tmp_path, gate={"require_receipts": True}, qualify={
        "control_fail_on": ["stuck_in_reasoning", "reasoning_loop"], "control_allowed": 3,
        "control": {"sim": {"layout": "packed"}},
        "candidate": {"base_urls": ["http://cand:8000/"], "receipts_dir": "/receipts"}})
    sc = load_scenario(path)
    cfg = with_sides(sc, control_urls=[], candidate_urls=[], control_receipts=None,
                     candidate_receipts=None)
    control = side_scenario(sc, cfg, Role.CONTROL)
    assert control.target.sim is not None and control.target.sim.layout == "packed"
    assert control.target.base_urls == []
    assert control.gate.role == "control" and control.gate.allowed == 3
    assert [str(v) for v in control.gate.fail_on] == ["stuck_in_reasoning", "reasoning_loop"]
    assert control.gate.require_receipts is False  # layout `off` leaves none
    candidate = side_scenario(sc, cfg, Role.CANDIDATE)
    assert candidate.target.base_urls == ["http://cand:8000"]
    assert candidate.target.receipts_dir == "/receipts"
    assert candidate.gate.role == "candidate" and candidate.gate.require_receipts is True
    assert candidate.qualify is None
    # A URL on the command line replaces the scenario's sim for that side.
    cfg = with_sides(sc, control_urls=["http://ctl:8000"], candidate_urls=[],
                     control_receipts=None, candidate_receipts=None)
    assert side_scenario(sc, cfg, Role.CONTROL).target.sim is None


def test_the_scenarios_sim_plays_the_control_with_the_bug_and_the_candidate_fixed(
        tmp_path: Path) -> None:
    """With no URL, each side the scenario gives no target runs its [target.sim]: the
    control with the packed builder (it must reproduce), the candidate at capacity stride;
    every other sim setting is the scenario's, and a side's own sim is kept."""
    sim = {"target": {"sim": {"layout": "prefix", "max_num_seqs": 8}}}
    path = scenario(tmp_path, 5, sim)
    sc = load_scenario(path)
    cfg = with_sides(sc, control_urls=[], candidate_urls=[], control_receipts=None,
                     candidate_receipts=None)
    control = side_scenario(sc, cfg, Role.CONTROL).target.sim
    candidate = side_scenario(sc, cfg, Role.CANDIDATE).target.sim
    assert control is not None and candidate is not None
    assert (control.layout, candidate.layout) == ("packed", "capacity")
    assert control.max_num_seqs == candidate.max_num_seqs == 8
    scenario(tmp_path, 5, sim, qualify={"candidate": {"sim": {"layout": "prefix"}}})
    sc = load_scenario(path)
    cfg = with_sides(sc, control_urls=[], candidate_urls=[], control_receipts=None,
                     candidate_receipts=None)
    kept = side_scenario(sc, cfg, Role.CANDIDATE).target.sim
    assert kept is not None and kept.layout == "prefix"


def test_a_control_of_another_model_makes_the_qualification_invalid(fake_server,
                                                                     tmp_path: Path) -> None:
    # Another model, always stuck, on a release the candidate does not share.
    _, c = fake_server(("stuck",), model="always-stuck", version="0.26.0")
    _, k = fake_server(("ok",), version="0.28.0")
    proc, out, doc = qualify(tmp_path, scenario(tmp_path), "--control", c.url,
                             "--candidate", k.url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert doc["verdict"] == "INVALID"
    assert doc["control"]["exit_code"] == 0 and doc["candidate"]["exit_code"] == 0
    assert "do not serve the same model (served name always-stuck vs fake-dsv4)" in \
        doc["reasons"][0]
    assert "qualify.allow_different_models" in proc.stdout
    assert doc["model"]["same"] is False and doc["model"]["allowed"] is False
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["control and candidate serve the same model"].find("error") is not None


def test_the_same_name_from_another_checkout_is_another_model(fake_server,
                                                             tmp_path: Path) -> None:
    _, c = fake_server(("ok", "stuck"), root="org/other-checkpoint")
    _, k = fake_server(("ok",), root="org/the-checkpoint")
    proc, _, doc = qualify(tmp_path, scenario(tmp_path), "--control", c.url,
                           "--candidate", k.url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "/v1/models root org/other-checkpoint vs org/the-checkpoint" in doc["reasons"][0]


def test_different_models_qualify_only_when_the_scenario_allows_it(fake_server,
                                                                   tmp_path: Path) -> None:
    _, c = fake_server(("stuck",), model="always-stuck", version="0.27.1")
    _, k = fake_server(("ok",), version="0.28.0")
    sc = scenario(tmp_path, qualify={"allow_different_models": True})
    proc, out, doc = qualify(tmp_path, sc, "--control", c.url, "--candidate", k.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["verdict"] == "QUALIFIED" and doc["model"]["allowed"] is True
    # Both releases are stated, on the page and on the command line.
    assert "control on 0.27.1 (/version), candidate on 0.28.0 (/version)" in doc["headline"]
    assert "allowed by qualify.allow_different_models" in doc["headline"]
    assert "control on 0.27.1 (/version)" in proc.stdout
    md = (out / "report.md").read_text()
    assert "| vLLM | 0.27.1 (/version) | 0.28.0 (/version) |" in md
    assert "| model | always-stuck | fake-dsv4 |" in md


def test_every_progress_line_names_its_side(fake_server, tmp_path: Path) -> None:
    """Two runs share one log: each waiting, phase and run-level line says its side."""
    _, c = fake_server(("ok", "stuck"))
    _, k = fake_server(("ok",))
    out = tmp_path / "qual"
    proc = run_cli("qualify", str(scenario(tmp_path)), "--out", str(out), "--control", c.url,
                   "--candidate", k.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    sides = [x.split(": ", 1)[0] for x in lines]
    assert set(sides) == {"control", "candidate"}, lines
    # The control's lines all come first, and each side announces each of its phases.
    assert sides == sorted(sides, key=["control", "candidate"].index)
    for side, url in (("control", c.url), ("candidate", k.url)):
        assert f"{side}: waiting for {url} to be ready" in proc.stderr
        for phase in ("priming", "measurement"):
            assert any(x.startswith(f"{side}: {phase}: ") and x.endswith("(done)")
                       for x in lines), (side, phase)
    # A run on its own has no side to name.
    alone = run_cli("run", str(scenario(tmp_path)), "--base-url", k.url, "--out",
                    str(tmp_path / "alone"))
    assert alone.returncode == 0 and alone.stderr.splitlines()[0].startswith("waiting for ")


def test_one_server_given_as_both_sides_is_bad_input(fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",))
    for args in (("--control", srv.url, "--candidate", srv.url),
                 ("--control", srv.url, "--candidate", srv.url + "/")):
        proc, out, _ = qualify(tmp_path, scenario(tmp_path), *args)
        assert proc.returncode == 3
        assert f"{srv.url} is given as both the control and the candidate" in proc.stderr
        assert sum(fake.counts.values()) == 0 and not out.exists()


def test_qualify_help_names_the_difference_test() -> None:
    proc = run_cli("qualify", "--help")
    assert "Fisher's exact test" in proc.stdout and "NOT PROVEN" in proc.stdout
