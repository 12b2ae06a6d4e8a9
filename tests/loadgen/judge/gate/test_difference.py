"""The two-sample test behind QUALIFIED: the candidate must be shown to fail less often
than the control, not merely to have a clean run of its own."""

from __future__ import annotations

import pytest
from scipy.stats import binom

from loadgen.judge.gate.difference import ALPHA, difference, per_side_needed


def test_a_rare_reproduction_and_a_clean_candidate_prove_nothing() -> None:
    # The case: 2 of 256 on the control, 0 of 256 on the candidate.
    tested = difference(2, 256, 0, 256)
    assert tested is not None and not tested.proven
    assert tested.p_value == pytest.approx(0.2495, abs=1e-3)
    # A candidate as broken as the control scores 0 of 256 about 13% of the time.
    assert binom.pmf(0, 256, 2 / 256) == pytest.approx(0.134, abs=1e-3)
    assert tested.per_side_needed == 577
    assert "NOT PROVEN" in tested.sentence() and "about 577 measured requests per side" \
        in tested.sentence()


def test_the_size_it_names_would_settle_it() -> None:
    needed = per_side_needed(2 / 256, 0.0)
    assert needed is not None
    settled = difference(round(needed * 2 / 256), needed, 0, needed)
    assert settled is not None and settled.proven
    short = difference(round((needed - 1) * 2 / 256), needed - 1, 0, needed - 1)
    assert short is not None and not short.proven


@pytest.mark.parametrize(("control", "candidate", "proven"), [
    ((13, 64), (0, 64), True), ((5, 256), (0, 256), True), ((4, 256), (0, 256), False),
    ((30, 100), (10, 100), True), ((3, 100), (1, 100), False), ((1, 10), (1, 10), False)])
def test_proven_only_below_five_percent(control: tuple[int, int], candidate: tuple[int, int],
                                        proven: bool) -> None:
    tested = difference(*control, *candidate)
    assert tested is not None
    assert tested.proven is proven is (tested.p_value < ALPHA)


def test_a_candidate_failing_as_often_can_never_be_settled() -> None:
    tested = difference(3, 100, 5, 100)
    assert tested is not None and not tested.proven and tested.per_side_needed is None
    assert tested.sentence().endswith("the candidate fails at least as often as the control")


def test_no_reply_on_a_side_is_no_test() -> None:
    assert difference(3, 0, 0, 100) is None
    assert difference(3, 100, 0, 0) is None
