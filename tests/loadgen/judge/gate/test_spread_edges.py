"""The failure-spread test that qualifies a run's bound: its buckets, its p-values (held to
the exact permutation test they estimate), and the sentence every report prints."""

from __future__ import annotations

import itertools
import math

import pytest

from loadgen.judge.gate.aggregate import TimelinePoint
from loadgen.judge.gate.spread import PERMUTATIONS, FailureSpread, failure_spread


def timeline(flags: list[bool], first: int = 0) -> list[TimelinePoint]:
    return [TimelinePoint(first + i, "x", 1, float(i), f) for i, f in enumerate(flags)]


def exact(flags: list[bool], sizes: list[int]) -> tuple[float, float]:
    """The exact permutation p-values (homogeneity, trend) of failures dealt at random
    over the run, by enumerating every way of dealing them into the buckets."""
    n, f = len(flags), sum(flags)
    edges = [0, *itertools.accumulate(sizes)]
    observed = [sum(flags[a:b]) for a, b in itertools.pairwise(edges)]
    expected = [s * f / n for s in sizes]
    mean = sum(i * s for i, s in enumerate(sizes)) / n

    def chi(counts: tuple[int, ...]) -> float:
        return sum((c - e) ** 2 / e for c, e in zip(counts, expected, strict=True))

    def trend(counts: tuple[int, ...]) -> float:
        return abs(sum((c - e) * (i - mean)
                       for i, (c, e) in enumerate(zip(counts, expected, strict=True))))

    p_chi = p_trend = 0.0
    for counts in itertools.product(*(range(s + 1) for s in sizes)):
        if sum(counts) != f:
            continue
        weight = math.prod(math.comb(s, c) for s, c in zip(sizes, counts, strict=True))
        weight /= math.comb(n, f)
        p_chi += weight * (chi(counts) >= chi(tuple(observed)) - 1e-9)
        p_trend += weight * (trend(counts) >= trend(tuple(observed)) - 1e-9)
    return p_chi, p_trend


# Failure patterns over runs whose buckets are equal and unequal in size.
PATTERNS = {
    "late": [False] * 24 + [True, False, True, True, False, True, True, True],
    "middle": [False] * 12 + [True, True, False, True, True, False] + [False] * 14,
    "scattered": [i % 7 == 3 for i in range(32)],
    "uneven sizes": [False] * 9 + [True, False, True] + [False] * 10 + [True] + [False] * 7,
    "early, 13": [True, True, False, True] + [False] * 9,
    "ties, 16": [True, False, False, False] * 2 + [False, True, False, False] * 2,
    "six apart": [i in (3, 5, 17, 30, 31, 33) for i in range(40)],
}


@pytest.mark.parametrize("name", list(PATTERNS))
def test_the_p_values_are_the_permutation_tests(name: str) -> None:
    flags = PATTERNS[name]
    spread = failure_spread(timeline(flags))
    p_chi, p_trend = exact(flags, [b.requests for b in spread.buckets])
    # 4000 draws: within four standard errors of the exact p, never 0, never above 1.
    for got, want in ((spread.p_uneven, p_chi), (spread.p_trend, p_trend)):
        assert got is not None
        assert abs(got - want) <= 4 * math.sqrt(max(want * (1 - want), 1e-3) / PERMUTATIONS)
        assert 1 / (PERMUTATIONS + 1) <= got <= 1.0


def test_the_same_records_give_the_same_p_values() -> None:
    flags = PATTERNS["six apart"]
    first, again = failure_spread(timeline(flags)), failure_spread(timeline(flags))
    assert 0.05 < first.p_uneven < 0.99 and 0.05 < first.p_trend < 0.99  # type: ignore[operator]
    assert (first.p_uneven, first.p_trend) == (again.p_uneven, again.p_trend)


def test_failures_dealt_evenly_are_as_even_as_any_deal() -> None:
    # One failure per bucket of equal size: no deal is more even, every deal counts.
    spread = failure_spread(timeline([i % 8 == 0 for i in range(64)]))
    assert (spread.p_uneven, spread.p_trend) == (1.0, 1.0)
    assert spread.direction != "rising"  # a flat rate is no rise
    assert spread.statement() == ("failures are spread evenly over the run as far as 8 can "
                                  "show (p=1)")


def test_the_buckets_cut_the_run_in_request_order() -> None:
    # 20 requests: 5 buckets of 4 (a quarter of the run at most per bucket count).
    flags = [False] * 4 + [True] * 2 + [False] * 14
    spread = failure_spread(list(reversed(timeline(flags, first=100))))
    assert [b.__dict__ for b in spread.buckets] == [
        {"first_seq": 100 + 4 * i, "requests": 4, "failures": 2 if i == 1 else 0}
        for i in range(5)]
    assert (spread.failures, spread.requests) == (2, 20)
    # Unequal: 13 requests, 3 buckets.
    sizes = [b.requests for b in failure_spread(timeline(PATTERNS["early, 13"])).buckets]
    assert sizes == [4, 4, 5]
    assert len(failure_spread(timeline([True] + [False] * 99)).buckets) == 8


def test_too_few_requests_or_failures_to_test_have_no_p_value() -> None:
    # Under 8 requests: one bucket, nothing to compare.
    seven = failure_spread(timeline([True, False, False, True, False, False, False]))
    assert [b.requests for b in seven.buckets] == [7]
    assert (seven.p_uneven, seven.p_trend, seven.direction) == (None, None, None)
    for flags in ([False] * 40, [True] * 40):
        spread = failure_spread(timeline(flags))
        assert (spread.p_uneven, spread.p_trend, spread.uneven) == (None, None, False)
    # Eight requests make two buckets; one failure is a failure to place.
    eight = failure_spread(timeline([True] + [False] * 7))
    assert len(eight.buckets) == 2 and eight.p_uneven is not None
    assert failure_spread(timeline([False] * 20 + [True] + [False] * 19)).p_trend is not None


# ------------------------------------------------------------------ the sentence

def test_a_rate_that_climbs_is_said_to_rise() -> None:
    spread = failure_spread(timeline([False] * 56 + [True] * 8))
    assert (spread.p_trend, spread.direction) == (1 / (PERMUTATIONS + 1), "rising")
    assert spread.uneven
    assert spread.statement() == ("failures are NOT spread evenly over the run: their rate "
                                  "is rising with request order (p=0.00025); the bound holds "
                                  "for this run's history only")


def test_a_rate_that_drops_is_said_to_fall() -> None:
    spread = failure_spread(timeline([True] * 8 + [False] * 56))
    assert spread.direction == "falling"
    assert "their rate is falling with request order" in spread.statement()


def test_the_direction_is_stated_however_slight_the_trend() -> None:
    # summary.json states which way the rate leans even where the trend is no evidence:
    # one failure just after the middle of eight buckets leans rising (trend 0.5).
    spread = failure_spread(timeline([False] * 32 + [True] + [False] * 31))
    assert spread.direction == "rising" and not spread.uneven
    spread = failure_spread(timeline([False] * 31 + [True] + [False] * 32))
    assert spread.direction == "falling"


def test_failures_bunched_mid_run_are_said_to_cluster() -> None:
    # Symmetric about the middle: no trend, but all in two of eight buckets.
    spread = failure_spread(timeline([False] * 24 + [True] * 16 + [False] * 24))
    assert spread.p_trend is not None and spread.p_trend > 0.5
    assert spread.p_uneven == 1 / (PERMUTATIONS + 1)
    assert spread.statement() == ("failures are NOT spread evenly over the run: they cluster "
                                  "in part of the run (p=0.00025); the bound holds for this "
                                  "run's history only")


def test_an_even_spread_states_the_smaller_p_value() -> None:
    # Whichever of the two tests came closer to calling the run uneven.
    for name, failures in (("scattered", 5), ("six apart", 6)):
        spread = failure_spread(timeline(PATTERNS[name]))
        assert not spread.uneven and spread.p_uneven != spread.p_trend
        low = min(spread.p_uneven, spread.p_trend)  # type: ignore[type-var]
        assert low < 1.0
        assert spread.statement() == ("failures are spread evenly over the run as far as "
                                      f"{failures} can show (p={low:.3g})")
    assert FailureSpread(failures=3).statement() == ("failures are spread evenly over the "
                                                     "run as far as 3 can show (p=1)")
    assert FailureSpread().statement() == "no failure: nothing to spread"


def test_the_spread_as_summary_json_states_it() -> None:
    spread = failure_spread(timeline([False] * 56 + [True] * 8))
    doc = spread.to_dict()
    assert doc == {"buckets": [{"first_seq": 8 * i, "requests": 8,
                                "failures": 8 if i == 7 else 0} for i in range(8)],
                   "failures": 8, "requests": 64, "p_uneven": spread.p_uneven,
                   "p_trend": spread.p_trend, "direction": "rising", "uneven": True,
                   "statement": spread.statement()}
