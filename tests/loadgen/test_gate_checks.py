"""The gate's checks on priming and on speculative decoding, at their exact thresholds."""

from __future__ import annotations

import pytest

from loadgen.judge.aggregate import PhaseStats
from loadgen.judge.gate import GateContext, acceptance_check, priming_check
from loadgen.scenario import GateConfig, ReferenceConfig


def priming(requests: int, infra: int, interrupted: int = 0) -> PhaseStats:
    st = PhaseStats()
    st.requests, st.infra_errors, st.interrupted = requests, infra, interrupted
    return st


@pytest.mark.parametrize("infra,limit,passed", [(0, 0, True), (1, 0, False), (2, 2, True),
                                                (3, 2, False)])
def test_priming_may_lose_as_many_requests_as_the_infrastructure_limit(
        infra: int, limit: int, passed: bool) -> None:
    check = priming_check(GateConfig(max_infra_errors=limit),
                          GateContext(priming=priming(16, infra), priming_planned=16))
    assert check.passed is passed and check.kind == "error"
    assert f"{16 - infra} of 16 priming requests answered by the model" in check.message


def test_priming_cut_short_is_too_few_replies() -> None:
    # 12 of 16 sent (the rest never were): 12 replies, 4 short of the plan.
    cfg = GateConfig(max_infra_errors=3)
    assert not priming_check(cfg, GateContext(priming=priming(12, 0),
                                              priming_planned=16)).passed
    assert priming_check(cfg, GateContext(priming=priming(13, 0), priming_planned=16)).passed
    assert not priming_check(cfg, GateContext(priming=None, priming_planned=16)).passed


def test_no_priming_asked_is_nothing_to_check() -> None:
    check = priming_check(GateConfig(), GateContext(priming=None, priming_planned=0))
    assert check.passed and check.message == "no priming asked of this run"


def rates(loaded: float, alone: float) -> dict[str, dict[str, float]]:
    return {"measurement": {"drafted": 700, "accepted": 700 * loaded, "acceptance": loaded},
            "reference": {"drafted": 70, "accepted": 70 * alone, "acceptance": alone}}


@pytest.mark.parametrize("loaded,passed", [(0.36, True), (0.35, True), (0.349, False)])
def test_acceptance_under_load_must_keep_the_stated_share_of_alone(loaded: float,
                                                                   passed: bool) -> None:
    context = GateContext(reference=ReferenceConfig(requests=4, min_acceptance_ratio=0.5),
                          acceptance=rates(loaded, 0.70))
    check = acceptance_check(context)
    assert check is not None and check.passed is passed
    assert "needs 0.5" in check.message


def test_no_reference_phase_no_acceptance_check_and_no_metrics_nothing_to_compare() -> None:
    assert acceptance_check(GateContext(acceptance=rates(0.1, 0.7))) is None
    check = acceptance_check(GateContext(reference=ReferenceConfig(requests=4)))
    assert check is not None and check.passed and "nothing to compare" in check.message
