"""How a reply is sampled is what its own body says, never the scenario's setting.

A replayed body may set its own temperature (or top_k) over the scenario's. Identical
greedy bodies must agree whatever the scenario says (`divergent`); bodies sampled at
0.8 are never held to greedy agreement, even under a scenario that says 0. Served end
to end: the same body replayed, every fourth reply finishing differently.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from loadgen.engine.requests import is_greedy, sampling
from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

#: (scenario temperature, what the replayed body sets, whether the body is greedy)
FAMILY = [
    (0.7, {"temperature": 0}, True),
    (0.7, {"temperature": 0.0}, True),
    (1.0, {"temperature": 0.6, "top_k": 1}, True),
    (0.0, {"temperature": 0.8}, False),
    (0.0, {"temperature": 1.0, "top_p": 0.95}, False),
    (0.0, {}, True),  # the body says nothing: the scenario's 0 is what was sent
    (0.9, {}, False),
]


def _replay(tmp_path: Path, sets: dict[str, object]) -> Path:
    body = {"messages": [{"role": "user", "content": "Hi, account Q7RST7."},
                         {"role": "user", "content": "Move it to the pro plan."}],
            "tools": [{"type": "function", "function": {
                "name": "change_plan", "parameters": {
                    "type": "object", "required": ["account_id", "plan"]}}}], **sets}
    path = tmp_path / "bodies.jsonl"
    path.write_bytes(orjson.dumps(body) + b"\n")
    return path


@pytest.mark.parametrize(("scenario_t", "sets", "greedy"), FAMILY,
                         ids=[f"scenario{t}-body{s}" for t, s, _ in FAMILY])
def test_greedy_agreement_follows_the_body(fake_server, tmp_path: Path, scenario_t: float,
                                           sets: dict[str, object], greedy: bool) -> None:
    _, srv = fake_server(("ok", "ok", "ok", "truncated"))
    sc = write_scenario(tmp_path / "s.toml", load={"concurrency": 1, "priming": 0,
                                                   "measurement": 12},
                        request={"temperature": scenario_t, "max_tokens": 48},
                        workload={"kind": "replay", "path": str(_replay(tmp_path, sets))},
                        gate={"ignore": ["truncated"]})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert {r["greedy"] for r in records} == {greedy}
    sent = {r["params"]["temperature"] for r in records}
    assert sent == {sets.get("temperature", scenario_t)}, "params say what was sent"
    summary = json.loads((out / "summary.json").read_text())
    divergent = summary["phases"]["measurement"]["verdicts"].get("divergent", 0)
    assert divergent == (3 if greedy else 0), summary["phases"]["measurement"]["verdicts"]


def test_sampling_is_read_from_the_body() -> None:
    assert sampling({"temperature": 0.2, "max_completion_tokens": 9, "n": 2}) == {
        "temperature": 0.2, "n": 2, "max_tokens": 9}
    assert sampling({"max_tokens": 5}) == {"temperature": None, "max_tokens": 5}
    assert is_greedy({"temperature": 0}) and is_greedy({"temperature": 1, "top_k": 1})
    assert not is_greedy({"temperature": None}), "the server's default is not greedy"
    assert not is_greedy({"temperature": False}), "a boolean is not a temperature"
    assert not is_greedy({"temperature": 0.01})
