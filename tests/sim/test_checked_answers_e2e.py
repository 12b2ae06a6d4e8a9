"""The known-answer and session scenarios end to end on the embedded sim (slow tier).

`dsv4-qual demo` runs each shipped scenario's control and candidate: the control must
reproduce with the quiet faces (a value altered, no loud failure needed), the candidate
must stay clean with every answer checked. Sessions that think longer than the sim's
5 s keep-alive get no spurious failure on any transport.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

pytestmark = pytest.mark.slow


def sides(out: Path) -> tuple[dict, dict]:
    return tuple(json.loads((out / side / "summary.json").read_text())  # type: ignore
                 for side in ("control", "candidate"))


def test_the_known_answer_demo_reproduces_with_quiet_faces(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = run_cli("demo", "--scenario", "sim-known-answer", "--out", str(out), "--quiet",
                   timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    control, candidate = sides(out)
    assert control["target"]["c128a_layout"] == "packed"
    verdicts = control["phases"]["measurement"]["verdicts"]
    # The quiet face: a clean finish with a value that is not the request's.
    assert verdicts.get("wrong_answer", 0) + verdicts.get("cross_talk", 0) > 0, verdicts
    assert candidate["phases"]["measurement"]["verdicts"] == {"ok": 128}
    answers = candidate["gate"]["answers"]
    assert answers["checked"] == 128 and answers["failed"] == 0
    assert set(answers["breakdown"]["probe"]) == {"echo", "needle", "lookup", "computed"}
    assert set(answers["breakdown"]["reasoning"]) == {"on", "off"}


def test_the_session_demo_reproduces_the_prefix_cache_face(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = run_cli("demo", "--scenario", "sim-sessions", "--out", str(out), "--quiet",
                   timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    control, candidate = sides(out)
    breakdown = control["gate"]["answers"]["breakdown"]
    # Only the sessions over the long shared prefix, only from a cache hit on.
    assert breakdown["prefix_tokens"]["1024"]["failed"] == 0
    assert breakdown["prefix_tokens"]["3072"]["failed"] > 0
    assert control["phases"]["measurement"]["verdicts"].get("stuck_in_reasoning", 0) == 0
    assert candidate["phases"]["measurement"]["verdicts"] == {"ok": 128}
    for side in (control, candidate):
        reuse = side["gate"]["prefix_cache"]
        assert reuse["hits"] > 0.5 * reuse["queries"]
        assert "prefix cache served" in side["gate"]["statement"]
    report = (out / "control" / "report.md").read_text()
    assert "## Sessions, turn by turn (measurement)" in report


@pytest.mark.parametrize("transport", ["raw", "aiohttp", "httpx"])
def test_think_time_past_the_servers_keep_alive_gives_no_spurious_failure(
        tmp_path: Path, transport: str) -> None:
    sc = write_scenario(tmp_path / "s.toml", {
        "target": {"sim": {"layout": "capacity", "prefix_caching": True,
                           "max_model_len": 4096}},
        "load": {"concurrency": 2, "measurement": 6},
        "request": {"max_tokens": 128},
        "workload": {"kind": "session", "sessions": 2, "turns": 3,
                     "shared_prefix_tokens": [200], "think_time_s": [5.5, 6.0]},
        "gate": {"prove_below": 0.5}})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--out", str(out), "--quiet", "--transport", transport,
                   timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 6}
