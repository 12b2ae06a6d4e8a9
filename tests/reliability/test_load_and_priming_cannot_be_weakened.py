"""A scenario's load is its claim: priming that never reached the model, or a command line
that weakens the load, never yields a quiet "clean" (through `dsv4-qual run`)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

SC = {"request": {"max_tokens": 96}, "gate": {"prove_below": 0.5}}


def run(tmp_path: Path, url: str, *args: str, priming: int = 4, infra: int = 0
        ) -> tuple[int, Path, str]:
    sc = write_scenario(tmp_path / "s.toml", SC, load={"priming": priming},
                        gate={"max_infra_errors": infra})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(out), "--quiet", *args)
    return proc.returncode, out, proc.stdout + proc.stderr


def test_priming_answered_by_a_gateway_not_the_model_makes_the_run_invalid(
        fake_server, tmp_path: Path) -> None:
    # Every priming request gets a 503 (the measurement would be answered cleanly).
    fake, srv = fake_server(("http_503",) * 4 + ("ok",) * 8)
    code, out, output = run(tmp_path, srv.url)
    assert code == 2, output
    summary = json.loads((out / "summary.json").read_text())
    # The first 503 spent the priming's budget: the run stopped there, nothing measured.
    assert "measurement" not in summary["phases"]
    assert set(fake.counts) == {"http_503"}
    (check,) = [c for c in summary["gate"]["checks"] if c["name"].startswith("priming")]
    assert not check["passed"]
    assert "0 of 4 priming requests answered by the model" in check["message"]
    assert "not warmed up" in check["message"]
    assert "priming stopped early" in output and "the first: HTTP 503" in output


def test_priming_within_the_infrastructure_limit_is_valid(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("http_503",) + ("ok",) * 11)
    code, out, output = run(tmp_path, srv.url, infra=1)
    assert code == 0, output
    summary = json.loads((out / "summary.json").read_text())
    (check,) = [c for c in summary["gate"]["checks"] if c["name"].startswith("priming")]
    assert check["passed"] and "3 of 4 priming requests" in check["message"]


@pytest.mark.parametrize("override,words", [
    (("--concurrency", "2"), "concurrency 2 (shipped: 4)"),
    (("--priming", "0"), "priming 0 (shipped: 4)"),
    (("--measurement", "6"), "measurement 6 (shipped: 8)"),
    (("--max-tokens", "48"), "max_tokens 48 (shipped: 96)"),
    (("--rate-limit", "50"), "rate_limit 50 (shipped: 0)"),
])
def test_an_override_that_weakens_the_load_is_refused(fake_server, tmp_path: Path,
                                                      override: tuple[str, str],
                                                      words: str) -> None:
    fake, srv = fake_server(("ok",))
    code, out, output = run(tmp_path, srv.url, *override)
    assert code == 3, output
    assert words in output and "--accept-weaker-load" in output
    assert sum(fake.counts.values()) == 0 and not out.exists()


def test_an_accepted_weaker_load_is_stated_in_every_report(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    code, out, output = run(tmp_path, srv.url, "--concurrency", "2", "--priming", "0",
                            "--accept-weaker-load")
    assert code == 0, output
    claim = "the scenario's claim does NOT hold as shipped"
    assert "concurrency 2 (shipped: 4); priming 0 (shipped: 4)" in output
    assert "load: concurrency 2, priming 0, 8 measured" in output  # the result line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["load"]["weakened"] and summary["load"]["holds_as_shipped"] is False
    assert summary["load"]["shipped"]["concurrency"] == 4
    assert claim in summary["gate"]["statement"]
    assert "under this load (concurrency 2, priming 0" in summary["gate"]["statement"]
    assert claim in (out / "report.md").read_text()
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["load.shipped"].startswith("concurrency 4, priming 4")
    (case,) = [c for c in suite.iter("testcase")
               if c.get("name") == "load as the scenario ships it"]
    assert case.find("skipped") is not None and suite.get("skipped") == "1"


def test_a_stronger_load_is_stated_and_passes(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    code, out, output = run(tmp_path, srv.url, "--concurrency", "8")
    assert code == 0, output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["load"]["changed"] == ["concurrency 8 (shipped: 4)"]
    assert summary["load"]["holds_as_shipped"] is True
    assert "never below what the scenario ships" in summary["gate"]["statement"]
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite.get("skipped") == "0"
