"""Broken replies dressed up and honest replies dressed down, through `dsv4-qual run`.

A stuck reply whose content is one zero-width space, and a reasoning loop that counts
its repeats, fail the gate (exit 1). Tool-call streams that repeat the function name in
every fragment, or leave `index` off continuation fragments, pass a clean run (exit 0)
with the right calls in records.jsonl. (The honest families that repeat themselves pass
the gate in test_gate_cannot_be_fooled's replay of the grown corpus.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.test_gate_cannot_be_fooled import run

BUSINESS = {"account_id": "XEHM4B", "plan": "business"}


def records(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in
            (tmp_path / "out" / "records.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("mode,verdict", [("invisible_stuck", "stuck_in_reasoning"),
                                          ("counted_loop", "reasoning_loop")])
def test_a_broken_reply_in_disguise_fails_the_gate(fake_server, tmp_path: Path, mode: str,
                                                   verdict: str) -> None:
    _, srv = fake_server((mode,))
    code, summary, output = run(tmp_path, srv.url)
    assert code == 1, output
    assert summary["phases"]["measurement"]["primary_verdicts"] == {verdict: 8}
    assert summary["gate"]["failures"] == 8


@pytest.mark.parametrize("mode,calls", [
    ("tool_name_repeated", [("change_plan", BUSINESS)]),
    ("tool_no_index", [("get_account", {"account_id": "XEHM4B"}), ("change_plan", BUSINESS)]),
])
def test_tool_calls_streamed_the_way_servers_do_pass(fake_server, tmp_path: Path, mode: str,
                                                      calls: list) -> None:
    _, srv = fake_server((mode,))
    code, summary, output = run(tmp_path, srv.url)
    assert code == 0, output
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 8}
    for record in records(tmp_path):
        got = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
               for c in record["tool_calls"]]
        assert got == calls
