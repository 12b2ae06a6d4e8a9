"""The sim's benchmarks run and print what docs/sim.md quotes (tiny sizes here; the
figures themselves come from the full runs, never from a test)."""

from __future__ import annotations

import runpy
import sys

import pytest

from tests.loadgen.conftest import REPO

#: Benchmarks: CI runs them (`pytest -m long`), the README's test command does not.
pytestmark = pytest.mark.long

BENCHMARKS = REPO / "benchmarks"


def run_benchmark(name: str, *args: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / name), *args])
    runpy.run_path(str(BENCHMARKS / name), run_name="__main__")


def test_the_profile_prints_buckets_beside_the_issue(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    run_benchmark("bench_sim_profile.py", "--requests", "48", "--concurrency", "16",
                  "--bucket", "16", "--max-tokens", "80", "--workloads", "sim-smoke",
                  monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert out.startswith("#52448 (vLLM 0.27.x")
    (row,) = [line for line in out.splitlines() if line.startswith("sim-smoke")]
    assert row.count("%") == 3 + 1  # three buckets of 16, then the overall rate
    assert "first 256:" in row


def test_gate_power_prints_both_arms(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    run_benchmark("bench_gate_power.py", "--draws", "200", "--sim-repeats", "1",
                  "--capacities", "4096", "--scenarios", "smoke,sim-smoke",
                  monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert "1. independent failures" in out and "2. the sim's own failures" in out
    smoke = [line for line in out.splitlines() if line.startswith("smoke ")]
    assert len(smoke) == 2  # one row per arm
    assert "8.94%" in smoke[0]  # detectable_rate_95 of 0 allowed in 32, as reports state
    assert "8+32" in smoke[1]


def test_the_soak_rounds_benchmark_counts_rounds_and_what_the_gate_read(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run_benchmark("bench_soak_rounds.py", "--soaks", "1", "--rounds", "1",
                      monkeypatch=monkeypatch)
    out = capsys.readouterr().out
    assert exited.value.code == 0, out
    (line,) = [x for x in out.splitlines() if x.strip().startswith("round 1:")]
    calls = line.split("receipt/server ")[1]
    receipt, server = calls.split("/")
    assert line.strip().startswith("round 1: exit 0") and int(receipt) == int(server) > 0
    assert "0 invalid round(s) of 1 in 1 soak(s)" in out
    assert "0 round(s) whose receipts counted fewer builder calls" in out
