"""The gate's checks on priming and on speculative decoding, at their exact thresholds."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.judge.gate.aggregate import PhaseStats
from loadgen.judge.gate.checks import CheckKind
from loadgen.judge.gate.gate import GateContext, acceptance_check, priming_check
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
    assert check is not None and check.passed and check.skipped
    assert "nothing to compare" in check.message


# ----------------------------------------------------- spec decode, server by server

def _server(t0: float, counters: list[tuple[float, float, float]]
            ) -> tuple[dict[str, object], list[dict[str, float]]]:
    """A server's phase marks and samples: (t, drafted, accepted) for the reference phase
    (the first two points) and the measurement (the rest: start, samples, end)."""
    ref, meas = counters[:2], counters[2:]

    def point(t: float, drafted: float, accepted: float) -> dict[str, float]:
        return {"t": t0 + t, "spec_draft_tokens": drafted, "spec_accepted_tokens": accepted}

    marks = {"reference": {"start": point(*ref[0]), "end": point(*ref[1])},
             "measurement": {"start": point(*meas[0]), "end": point(*meas[-1])}}
    return {"phase_marks": marks}, [point(*c) for c in meas[1:-1]]


def _document(**servers: list[tuple[float, float, float]]) -> dict[str, object]:
    info, samples = {}, []
    for url, counters in servers.items():
        info[url], inside = _server(0.0, counters)
        samples += [{"server": url, **s} for s in inside]
    return {"servers": info, "samples": samples}


def test_one_collapsing_replica_does_not_hide_in_the_pooled_ratio() -> None:
    from loadgen.targets.telemetry_summary import acceptance_by_server, phase_acceptance

    # Alone both accept 5 of 7; under load a accepts 5 of 7, b 1 of 7: pooled 3 of 7 is
    # 0.6 of alone (a pass at 0.5), b alone is 0.2.
    document = _document(
        a=[(0, 0, 0), (1, 70, 50), (2, 70, 50), (3, 770, 550), (4, 1470, 1050)],
        b=[(0, 0, 0), (1, 70, 50), (2, 70, 50), (3, 770, 150), (4, 1470, 250)])
    pooled = phase_acceptance(acceptance_by_server(document))
    assert pooled["measurement"]["acceptance"] == pytest.approx(1200 / 2800)
    context = GateContext(reference=ReferenceConfig(requests=4), acceptance=pooled,
                          acceptance_by_server=acceptance_by_server(document))
    check = acceptance_check(context)
    assert check is not None and not check.passed
    assert check.message.startswith("1 of 2 servers collapse under load: b: acceptance "
                                    "0.143 under load, 0.714 alone (ratio 0.20")
    # Without the per-server view, the pooled ratio would have passed.
    assert acceptance_check(GateContext(reference=ReferenceConfig(requests=4),
                                        acceptance=pooled)).passed


def test_a_counter_reset_mid_phase_is_counted_across_and_stated() -> None:
    from loadgen.targets.telemetry_summary import acceptance_by_server, phase_acceptance

    # The measurement: 700 drafted, 500 accepted, then a restart: counters from zero to
    # 700 and 100; the increase is 1400 drafted, 600 accepted, not "nothing".
    document = _document(a=[(0, 0, 0), (1, 70, 50), (2, 70, 50), (3, 770, 550),
                            (4, 0, 0), (5, 700, 100)])
    by_server = acceptance_by_server(document)
    assert by_server["a"]["measurement"] == {"drafted": 1400, "accepted": 600,
                                             "acceptance": 600 / 1400, "resets": 1,
                                             "generated": None}
    context = GateContext(reference=ReferenceConfig(requests=4),
                          acceptance=phase_acceptance(by_server), acceptance_by_server=by_server)
    check = acceptance_check(context)
    assert check is not None and check.passed  # 0.43 of 0.71 alone: 0.6 >= 0.5
    assert "a's spec-decode counters went down 1 time(s) during the measurement (a " \
           "restart): counted across" in check.message


@settings(max_examples=400, deadline=None)
@given(loaded=st.one_of(st.just(0.0), st.floats(0, 1)),
       alone=st.one_of(st.just(0.0), st.just(5e-324), st.floats(0, 1)),
       needs=st.sampled_from([0.25, 0.5, 0.6, 0.75, 1.0]),
       servers=st.integers(1, 3))
def test_the_acceptance_check_and_its_words_agree(loaded: float, alone: float, needs: float,
                                                  servers: int) -> None:
    """On any rates (zeros and boundaries included) the check passes exactly when every
    ratio it states reaches what it says it needs, and never passes a drafter that
    accepted nothing alone."""
    by_server = {f"s{i}": {"measurement": {"drafted": 70.0, "accepted": 70 * loaded,
                                           "acceptance": loaded},
                           "reference": {"drafted": 7.0, "accepted": 7 * alone,
                                         "acceptance": alone}}
                 for i in range(servers)}
    context = GateContext(reference=ReferenceConfig(requests=4, min_acceptance_ratio=needs),
                          acceptance_by_server=by_server)
    check = acceptance_check(context)
    assert check is not None
    stated = [(float("inf") if over else float(r), float(n)) for over, r, n in
              re.findall(r"ratio (>)?(\d+(?:\.\d+)?), needs (\d+(?:\.\d+)?)\)",
                         check.message)]
    if alone <= 0:
        assert not check.passed and "none of 7 drafted tokens accepted" in check.message
        return
    assert stated, check.message
    assert check.passed == all(r >= n for r, n in stated), check.message
    assert check.passed == (Fraction(loaded) >= Fraction(needs) * Fraction(alone))


@pytest.mark.parametrize(("phase", "counts", "why"), [
    ("measurement", {"drafted": 700.0, "accepted": 900.0, "generated": 2000.0},
     "900 accepted of 700 drafted"),
    ("reference", {"drafted": 70.0, "accepted": 50.0, "generated": 20.0},
     "50 accepted, 20 generated"),
])
def test_impossible_spec_counters_make_the_run_invalid(phase: str, counts: dict[str, float],
                                                       why: str) -> None:
    """Counters that cannot be true (a stuck, swapped or foreign counter) leave nothing
    to judge acceptance by: invalid (exit 2), saying which and why, never a pass."""
    fine = {"drafted": 70.0, "accepted": 50.0, "acceptance": 50 / 70, "generated": 500.0}
    by_server = {"http://a": {"reference": fine, "measurement": fine,
                              phase: {**counts, "acceptance": counts["accepted"]
                                      / counts["drafted"]}}}
    context = GateContext(reference=ReferenceConfig(requests=4), acceptance_by_server=by_server)
    check = acceptance_check(context)
    assert check is not None and not check.passed and check.kind == CheckKind.ERROR
    assert why in check.message and "cannot be judged" in check.message


def test_a_drafter_that_stopped_drafting_fails() -> None:
    fine = {"drafted": 70.0, "accepted": 50.0, "acceptance": 50 / 70, "generated": 500.0}
    stopped = {"drafted": 0.0, "accepted": 0.0, "acceptance": None, "generated": 4000.0}
    context = GateContext(reference=ReferenceConfig(requests=4), acceptance_by_server={
        "http://a": {"reference": fine, "measurement": stopped}})
    check = acceptance_check(context)
    assert check is not None and not check.passed and check.kind == CheckKind.FAILURE
    assert check.message == ("http://a drafted nothing in the measurement while it generated "
                             "4000 tokens (speculative decoding stopped drafting)")
    # Too little generated to say: nothing to compare, as before.
    few = {**stopped, "generated": 10.0}
    check = acceptance_check(GateContext(reference=ReferenceConfig(requests=4),
                                         acceptance_by_server={"http://a": {
                                             "reference": fine, "measurement": few}}))
    assert check is not None and check.passed
