"""Replies with the right form and the wrong substance fail the gate, through `dsv4-qual run`.

The loopback server answers every request in a well-formed way: a short tool call, or a
fluent answer with `stop`. What it says is wrong: another request's account (cross-talk),
or an answer to a question nobody asked. Each run must exit 1; the same server answering
what each request asks exits 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

TOOL_TURNS = {"load": {"measurement": 16}, "request": {"max_tokens": 96},
              "workload": {"variant": "per-request", "accounts": 16},
              "gate": {"prove_below": 0.2}}


def documents(tools: bool) -> dict:
    return {"load": {"measurement": 16}, "request": {"max_tokens": 96},
            "workload": {"kind": "long-context", "context_tokens": [64, 256], "tools": tools},
            "gate": {"prove_below": 0.2}}


def run(tmp_path: Path, url: str, *scenario: dict) -> tuple[int, dict, list[dict], str]:
    sc = write_scenario(tmp_path / "s.toml", *scenario)
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", url, "--out", str(out), "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    derived = [json.loads(x) for x in (out / "run_level.jsonl").read_text().splitlines()]
    return proc.returncode, summary, derived, proc.stdout + proc.stderr


@pytest.mark.parametrize("scenario", [TOOL_TURNS, documents(tools=True),
                                      documents(tools=False)],
                         ids=["tool-turn", "documents-with-tools", "documents-answered"])
def test_answering_what_each_request_asks_passes(fake_server, tmp_path: Path,
                                                 scenario: dict) -> None:
    _, srv = fake_server(("ok",))
    code, summary, derived, output = run(tmp_path, srv.url, scenario)
    assert code == 0, output
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 16}
    assert derived == []


@pytest.mark.parametrize("scenario", [TOOL_TURNS, documents(tools=True),
                                      documents(tools=False)],
                         ids=["tool-turn", "documents-with-tools", "documents-answered"])
def test_answering_with_another_requests_facts_fails(fake_server, tmp_path: Path,
                                                     scenario: dict) -> None:
    _, srv = fake_server(("cross_talk",))
    code, summary, derived, output = run(tmp_path, srv.url, scenario)
    assert code == 1, output
    m = summary["phases"]["measurement"]
    assert m["verdicts"].get("cross_talk") == 16, m["verdicts"]
    assert "wrong_answer" not in m["verdicts"]  # the wrong account was another request's
    assert summary["gate"]["failures"] == 16
    # records.jsonl keeps what each reply got on its own; run_level.jsonl says who it read.
    records = [json.loads(x) for x in (tmp_path / "out" / "records.jsonl").read_text()
               .splitlines()]
    assert all("cross_talk" not in r["verdicts"] for r in records)
    by_seq = {r["seq"]: r for r in records}
    for line in derived:
        mine = set(by_seq[line["seq"]]["expected"]["facts"].values())
        for source in line["findings"]["cross_talk"]["sources"]:
            theirs = set(by_seq[source["source_seq"]]["expected"]["facts"].values())
            assert source["code"] in theirs - mine
    assert sum(s["in_flight_together"] for line in derived
               for s in line["findings"]["cross_talk"]["sources"]) >= 8
    assert "cross_talk" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize("scenario,field", [
    (TOOL_TURNS, "calls"), (documents(tools=False), "content")],
    ids=["tool-turn", "documents-answered"])
def test_answering_another_question_fluently_fails(fake_server, tmp_path: Path,
                                                   scenario: dict, field: str) -> None:
    _, srv = fake_server(("other_question",))
    code, summary, _, output = run(tmp_path, srv.url, scenario)
    assert code == 1, output
    assert summary["phases"]["measurement"]["verdicts"] == {"wrong_answer": 16}
    record = json.loads((tmp_path / "out" / "records.jsonl").read_text().splitlines()[0])
    assert record["findings"]["wrong_answer"][0]["field"] == field


def test_salad_that_only_concurrency_brings_fails_and_alone_passes(fake_server,
                                                                   tmp_path: Path) -> None:
    # Clean at one request in flight, salad in the reasoning (then the right call) when
    # not alone: the gate under load fails it, the same server at concurrency 1 does not,
    # and a reference phase shows the server alone agreeing with itself.
    _, srv = fake_server(("garble_when_busy",))
    loaded = {"reference": {"requests": 4}}
    code, summary, _, output = run(tmp_path, srv.url, TOOL_TURNS, loaded)
    assert code == 1, output
    m = summary["phases"]["measurement"]
    assert m["verdicts"].get("garbled", 0) >= 12, m["verdicts"]
    assert summary["reference"]["oracles"] == 4  # alone, every reply was clean
    (tmp_path / "out").rename(tmp_path / "loaded")
    code, summary, _, output = run(tmp_path, srv.url, TOOL_TURNS, loaded,
                                   {"load": {"concurrency": 1}})
    assert code == 0, output
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 16}
