"""Exact binomial (Clopper-Pearson) bounds on a failure rate.

"0 failures in 256" does not mean "0%": it means the rate is below ~1.16% with 95%
confidence (one-sided). A clean candidate reports this bound, so a reader knows how
much a run of that size can prove.
"""

from __future__ import annotations


def upper_bound(failures: int, n: int, confidence: float = 0.95) -> float | None:
    """One-sided exact upper bound of the rate; None when nothing was measured."""
    if n <= 0:
        return None
    if failures >= n:
        return 1.0
    from scipy.stats import beta  # heavy: imported when a report is written, not before

    return float(beta.ppf(confidence, failures + 1, n - failures))


def lower_bound(failures: int, n: int, confidence: float = 0.95) -> float | None:
    """One-sided exact lower bound: how surely a control reproduced the bug."""
    if n <= 0:
        return None
    if failures <= 0:
        return 0.0
    from scipy.stats import beta

    return float(beta.ppf(1 - confidence, failures, n - failures + 1))


def describe_bound(failures: int, n: int) -> str:
    ub = upper_bound(failures, n)
    if ub is None:
        return "no measured requests"
    return f"{failures} of {n} failed: failure rate < {ub * 100:.2f}% at 95% confidence"
