"""Clopper-Pearson bounds and the gate's decisions and exit codes."""

from __future__ import annotations

import pytest

from loadgen.judge import gate as gate_mod
from loadgen.judge.aggregate import PhaseStats
from loadgen.judge.bounds import describe_bound, lower_bound, upper_bound
from loadgen.judge.gate import GateResult
from loadgen.results import RunFacts
from loadgen.scenario import GateConfig
from loadgen.targets.facts import ServerFacts


def evaluate(cfg: GateConfig, st: PhaseStats | None, *, invalid: str | None = None,
             interrupted: str | None = None, receipts: dict | None = None,
             gate_stride_violations: bool = False) -> GateResult:
    """The gate over one measurement phase, with the run's and the server's facts given."""
    if gate_stride_violations:
        cfg = cfg.model_copy(update={"fail_on_stride_violations": True})
    run = RunFacts(run_id="r", scenario="s", base_urls=["http://x"], invalid=invalid,
                   interrupted=interrupted)
    return gate_mod.evaluate(cfg, st, run, ServerFacts(receipts=receipts or {}))


def test_zero_of_256_is_about_1_16_percent() -> None:
    assert upper_bound(0, 256) == pytest.approx(1 - 0.05 ** (1 / 256), rel=1e-9)
    assert upper_bound(0, 256) == pytest.approx(0.01163, abs=1e-5)
    assert describe_bound(0, 256).endswith("< 1.16% at 95% confidence")


def test_bounds_edges() -> None:
    assert upper_bound(0, 0) is None and lower_bound(0, 0) is None
    assert upper_bound(5, 5) == 1.0
    assert lower_bound(0, 10) == 0.0
    # 298 of 1024 (#52448): the rate is above ~26.9% with 95% confidence.
    assert lower_bound(298, 1024) == pytest.approx(0.2686, abs=2e-3)
    assert upper_bound(298, 1024) > 298 / 1024 > lower_bound(298, 1024)


def stats(measured: int, failing: int, infra: int = 0, interrupted: int = 0) -> PhaseStats:
    st = PhaseStats()
    st.requests = measured + interrupted
    st.interrupted = interrupted
    st.infra_errors = infra
    st.failing_seqs = set(range(failing))
    st.verdicts["stuck_in_reasoning"] = failing
    return st


def test_candidate_clean_passes_and_failing_fails() -> None:
    cfg = GateConfig(role="candidate", allowed=0, min_measured=10)
    ok = evaluate(cfg, stats(100, 0))
    assert (ok.passed, ok.exit_code, ok.failures) == (True, 0, 0)
    bad = evaluate(cfg, stats(100, 1))
    assert (bad.passed, bad.exit_code) == (False, 1)
    allowed = evaluate(GateConfig(role="candidate", allowed=1), stats(100, 1))
    assert allowed.exit_code == 0


def test_control_passes_only_when_it_reproduces() -> None:
    cfg = GateConfig(role="control", allowed=0)
    assert evaluate(cfg, stats(64, 5)).exit_code == 0
    assert evaluate(cfg, stats(64, 0)).exit_code == 1


@pytest.mark.parametrize("kwargs,st,code", [
    ({"invalid": "server not ready"}, stats(0, 0), 2),
    ({"interrupted": "interrupted by SIGINT"}, stats(10, 0, interrupted=3), 130),
    ({}, stats(100, 0, infra=1), 2),
    ({}, stats(5, 0), 2),  # under min_measured
])
def test_invalid_runs(kwargs, st, code) -> None:
    cfg = GateConfig(role="candidate", min_measured=10)
    assert evaluate(cfg, st, **kwargs).exit_code == code


def test_infra_limit_is_settable() -> None:
    cfg = GateConfig(max_infra_errors=2)
    assert evaluate(cfg, stats(100, 0, infra=2)).exit_code == 0
    assert evaluate(cfg, stats(100, 0, infra=3)).exit_code == 2


def test_receipts_required() -> None:
    cfg = GateConfig(require_receipts=True)
    assert evaluate(cfg, stats(10, 0), receipts={"count": 0}).exit_code == 2
    assert evaluate(cfg, stats(10, 0), receipts={"count": 3, "patched": False}).exit_code == 2
    assert evaluate(cfg, stats(10, 0), receipts={"count": 3, "patched": True}).exit_code == 0


def test_stride_violations_fail_a_clean_candidate() -> None:
    cfg = GateConfig()
    receipts = {"count": 1, "patched": True, "stride_violations": 4,
                "first_violation": {"row_stride": 128}}
    gate = evaluate(cfg, stats(10, 0), receipts=receipts, gate_stride_violations=True)
    assert gate.exit_code == 1
    assert any("4 violation" in r for r in gate.reasons)
    assert evaluate(cfg, stats(10, 0), receipts=receipts).exit_code == 0


def test_zero_stride_violations_pass_only_when_the_guard_saw_calls() -> None:
    cfg = GateConfig()
    clean = {"count": 2, "patched": True, "guard_calls": 900, "stride_violations": 0}
    gate = evaluate(cfg, stats(10, 0), receipts=clean, gate_stride_violations=True)
    assert gate.exit_code == 0
    (check,) = [c for c in gate.checks if "stride" in c.name]
    assert check.passed and "0 violation(s) in 900 guarded builder call(s)" in check.message
    silent = {"count": 2, "patched": True, "guard_calls": 0, "stride_violations": 0}
    gate = evaluate(cfg, stats(10, 0), receipts=silent, gate_stride_violations=True)
    assert gate.exit_code == 2  # run invalid: nothing was watched
    assert any("no builder calls" in r for r in gate.reasons)
    assert evaluate(cfg, stats(10, 0), receipts={}, gate_stride_violations=True).exit_code == 2
