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


def required_measured(prove_below: float, allowed: int = 0, confidence: float = 0.95,
                      limit: int = 100_000_000) -> int | None:
    """The fewest measured requests whose upper bound, at `allowed` failures, is below
    `prove_below`: what a candidate must measure before its pass can prove the rate.

    None when even `limit` requests would not do (an `allowed` too large for the rate)."""
    if not 0 < prove_below < 1:
        raise ValueError("prove_below must be between 0 and 1")
    lo, hi = allowed + 1, allowed + 1
    while (upper_bound(allowed, hi, confidence) or 1.0) >= prove_below:
        if hi >= limit:
            return None
        lo, hi = hi + 1, min(limit, hi * 2)
    while lo < hi:  # the bound falls as n grows: bisect for the first n below
        mid = (lo + hi) // 2
        if (upper_bound(allowed, mid, confidence) or 1.0) < prove_below:
            hi = mid
        else:
            lo = mid + 1
    return lo


def detectable_rate(n: int, allowed: int = 0, power: float = 0.95) -> float | None:
    """The smallest failure rate that a run of `n` independent requests would catch
    (more than `allowed` failures) with probability `power`; None when nothing was
    measured. 0 allowed of 256 catches a server failing 1.2% of requests 95% of the time."""
    if n <= 0 or allowed >= n:
        return None
    from scipy.stats import beta

    # P(X > allowed) for X ~ Binomial(n, p) equals the Beta(allowed+1, n-allowed) CDF at p.
    return float(beta.ppf(power, allowed + 1, n - allowed))
