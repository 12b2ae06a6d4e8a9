"""Known answers, through `dsv4-qual run`: a server that corrupts answers in any way fails,
and one that words the right answer freely passes.

The server answers the known-answer and session workloads from the load generator's own
workload (`tests.support.known_answer_replies`): honestly, in free wordings, or with
every reply corrupted by one family (an edit of one character at every position in turn,
a paraphrase around a wrong value, another request's or session's value, an earlier
turn's answer, a changed call argument). No detector of failure shapes is needed to
fail them: each run's every measured reply must fail, and the statement must say the
replies were checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.loadgen.conftest import run_cli
from tests.support.known_answer_replies import BROKEN_FAMILIES, Oracle, broken, honest
from tests.support.scenario_files import write_scenario

WORKLOAD = {"kind": "mix", "weights": [3.0, 1.0], "parts": [
    {"kind": "known-answer", "needle_tokens": [128], "needle_depths": [0.1, 0.5, 0.9]},
    {"kind": "session", "sessions": 4, "shared_prefix_tokens": [100, 300],
     "think_time_s": [0.0, 0.0]}]}
MEASURED = 128
SCENARIO = {"load": {"measurement": MEASURED, "concurrency": 8},
            "request": {"max_tokens": 256}, "workload": WORKLOAD,
            "gate": {"prove_below": 0.05}}


def run(tmp_path: Path, url: str) -> tuple[int, dict, str]:
    sc = write_scenario(tmp_path / "s.toml", SCENARIO)
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(out), "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    return proc.returncode, summary, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle(WORKLOAD)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_right_answer_in_free_words_passes(fake_server, tmp_path: Path, oracle: Oracle,
                                               seed: int) -> None:
    fake, srv = fake_server(("scripted",))
    fake.script = honest(oracle, seed)
    code, summary, output = run(tmp_path, srv.url)
    assert code == 0, output
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": MEASURED}
    answers = summary["gate"]["answers"]
    assert answers["checked"] == MEASURED and answers["failed"] == 0
    assert f"{MEASURED} of {MEASURED} measured replies had an answer checked exactly" \
        in summary["gate"]["statement"]


@pytest.mark.parametrize("family", BROKEN_FAMILIES)
def test_every_corrupted_answer_fails(fake_server, tmp_path: Path, oracle: Oracle,
                                      family: str) -> None:
    fake, srv = fake_server(("scripted",))
    fake.script = broken(oracle, family)
    code, summary, output = run(tmp_path, srv.url)
    assert code == 1, output
    gate = summary["gate"]
    assert gate["failures"] == MEASURED, summary["phases"]["measurement"]["verdicts"]
    assert gate["answers"]["failed"] == MEASURED
    verdicts = summary["phases"]["measurement"]["verdicts"]
    assert set(verdicts) & {"wrong_answer", "cross_talk", "stale_answer"}
    if family == "another":
        assert verdicts.get("cross_talk", 0) > MEASURED // 4, verdicts
    if family == "stale":
        assert verdicts.get("stale_answer", 0) > 0, verdicts
