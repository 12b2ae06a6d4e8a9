"""Does the candidate fail less often than the control? A two-sample test, exact.

A candidate's clean run bounds its own failure rate; it says nothing about the control's.
Against a control that reproduced the bug 2 times in 256 (0.8%), a candidate as broken as
the control scores 0 of 256 about one time in eight, so "control reproduced, candidate
clean" is no evidence that the candidate is fixed. QUALIFIED therefore needs the
candidate's failure rate shown *below the control's* at 95%: Fisher's exact test,
one-sided (the control's odds of failing above the candidate's), on the two runs' gated
failures and measured replies. The candidate's count is its gate's (every failure
verdict), which can only make the difference harder to prove. When it is not proven,
the answer says how many measured requests per side would settle it if each side's
observed rate holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: The difference must be shown at this level (95% confidence, one-sided).
ALPHA = 0.05
TEST = "Fisher's exact test, one-sided"
_LIMIT = 10_000_000


def _p_value(control_failures: int, control_n: int, candidate_failures: int,
             candidate_n: int) -> float:
    from scipy.stats import fisher_exact  # heavy: imported when a qualification is judged

    table = [[control_failures, control_n - control_failures],
             [candidate_failures, candidate_n - candidate_failures]]
    return float(fisher_exact(table, alternative="greater").pvalue)


def per_side_needed(control_rate: float, candidate_rate: float,
                    start: int = 1) -> int | None:
    """The fewest measured requests per side whose expected counts (each side failing at
    its observed rate) the test would tell apart; None when no size would (the candidate
    fails at least as often as the control, or it would take past ten million)."""
    if candidate_rate >= control_rate:
        return None

    def settles(n: int) -> bool:
        return _p_value(round(n * control_rate), n, round(n * candidate_rate), n) < ALPHA

    lo, hi = max(1, start), max(1, start)
    while not settles(hi):
        if hi >= _LIMIT:
            return None
        lo, hi = hi + 1, min(_LIMIT, 2 * hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if settles(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Difference:
    """The test between the two sides of a qualification, and what it decided."""

    control_failures: int
    control_measured: int
    candidate_failures: int
    candidate_measured: int
    p_value: float
    proven: bool
    #: When not proven: measured requests per side that would settle it at the observed
    #: rates (None: no size would, or it was proven).
    per_side_needed: int | None
    test: str = TEST

    def sentence(self) -> str:
        """What the test decided, in the words every page uses."""
        said = (f"{TEST} on gated failures, control {self.control_failures}/"
                f"{self.control_measured} vs candidate {self.candidate_failures}/"
                f"{self.candidate_measured}: p = {self.p_value:.3g}")
        if self.proven:
            return (f"{said} < {ALPHA:g}: the candidate fails less often than the control "
                    "at 95% confidence")
        why = (f"{said}, not below {ALPHA:g}: a candidate as broken as the control would "
               f"score this often, so the difference is NOT PROVEN")
        if self.per_side_needed is not None:
            return (f"{why}; about {self.per_side_needed} measured requests per side would "
                    "settle it if both sides keep their observed rates")
        return f"{why}; no sample size would settle it: the candidate fails at least as " \
               "often as the control"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sentence": self.sentence()}


def difference(control_failures: int, control_measured: int, candidate_failures: int,
               candidate_measured: int) -> Difference | None:
    """The test on two runs' counts; None when a side measured nothing."""
    if control_measured <= 0 or candidate_measured <= 0:
        return None
    p = _p_value(control_failures, control_measured, candidate_failures, candidate_measured)
    proven = p < ALPHA
    needed = None if proven else per_side_needed(
        control_failures / control_measured, candidate_failures / candidate_measured,
        start=max(control_measured, candidate_measured))
    return Difference(control_failures, control_measured, candidate_failures,
                      candidate_measured, p, proven, needed)
