"""`dsv4-qual demo`: the README's first command."""

from __future__ import annotations

import json
from pathlib import Path

from tests.loadgen.conftest import REPO, run_cli


def test_demo_reproduces_under_packed_and_stays_clean_under_capacity(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = run_cli("demo", "--out", str(out), "--quiet", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "control reproduced the bug and the candidate stayed clean" in proc.stdout
    control = json.loads((out / "control" / "summary.json").read_text())
    candidate = json.loads((out / "candidate" / "summary.json").read_text())
    assert control["gate"]["role"] == "control" and control["gate"]["passed"]
    assert control["target"]["c128a_layout"] == "packed"
    assert control["phases"]["measurement"]["verdicts"]["stuck_in_reasoning"] > 0
    assert candidate["gate"]["role"] == "candidate" and candidate["gate"]["passed"]
    assert candidate["target"]["c128a_layout"] == "capacity"
    assert candidate["phases"]["measurement"]["verdicts"] == {"ok": 64}
    for role in ("control", "candidate"):
        for name in ("records.jsonl", "summary.json", "report.md", "junit.xml",
                     "report.html", "server.json"):
            assert (out / role / name).is_file()
    # The side-by-side qualification reports of `qualify`, which the demo is.
    qualification = json.loads((out / "qualify.json").read_text())
    assert qualification["exit_code"] == 0
    for name in ("report.md", "report.html", "junit.xml"):
        assert (out / name).is_file()

    # `dsv4-qual report` rebuilds the whole demo directory (the line printed says where).
    assert f"reports in {out}" in proc.stdout
    for gone in (out / "qualify.json", out / "report.html", out / "control" / "summary.json",
                 out / "candidate" / "report.md"):
        gone.unlink()
    rebuilt = run_cli("report", str(out))
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert rebuilt.stdout.startswith("qualify sim-smoke: QUALIFIED (exit 0)")
    assert json.loads((out / "qualify.json").read_text())["headline"] == \
        qualification["headline"]
    assert (out / "control" / "summary.json").is_file()
    assert (out / "candidate" / "report.md").is_file() and (out / "report.html").is_file()


def test_demo_exits_2_when_the_control_cannot_reproduce(tmp_path: Path) -> None:
    text = (REPO / "scenarios" / "sim-smoke.toml").read_text()
    text = text.replace("concurrency = 16", "concurrency = 1")
    text = text.replace("measurement = 64", "measurement = 4").replace(
        "prove_below = 0.05", "prove_below = 0.9").replace("priming = 16", "priming = 0")
    sc = tmp_path / "serial.toml"
    sc.write_text(text)
    proc = run_cli("demo", "--scenario", str(sc), "--out", str(tmp_path / "d"), "--quiet")
    assert proc.returncode == 2
    assert "control did not reproduce the bug" in proc.stdout
    assert not (tmp_path / "d" / "candidate" / "summary.json").exists()  # never run
