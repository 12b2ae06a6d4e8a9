"""Exact binomial (Clopper-Pearson) bounds on a failure rate.

"0 failures in 256" does not mean "0%": it means the rate is below ~1.16% with 95%
confidence (one-sided). A clean candidate reports this bound, so a reader knows how
much a run of that size can prove.
"""

from __future__ import annotations

import math


def _beta_quantile(q: float, a: float, b: float) -> float:
    """The Beta(a, b) quantile at q: scipy.stats' `beta.ppf`, which is this special
    function, without importing scipy.stats (about half a CPU-second a process, paid
    by every run for three numbers). Imported when a bound is asked, not before."""
    from scipy.special import betaincinv

    return float(betaincinv(a, b, q))


def upper_bound(failures: int, n: int, confidence: float = 0.95) -> float | None:
    """One-sided exact upper bound of the rate; None when nothing was measured."""
    if n <= 0:
        return None
    if failures >= n:
        return 1.0
    return _beta_quantile(confidence, failures + 1, n - failures)


def lower_bound(failures: int, n: int, confidence: float = 0.95) -> float | None:
    """One-sided exact lower bound: how surely a control reproduced the bug."""
    if n <= 0:
        return None
    if failures <= 0:
        return 0.0
    return _beta_quantile(1 - confidence, failures, n - failures + 1)


def describe_bound(failures: int, n: int) -> str:
    ub = upper_bound(failures, n)
    if ub is None:
        return "no measured requests"
    return f"{failures} of {n} failed: failure rate < {ub * 100:.2f}% at 95% confidence"


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (no underflow at large n)."""
    log_p, log_q, log_n = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    return math.fsum(math.exp(log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                              + i * log_p + (n - i) * log_q) for i in range(k + 1))


def _proves(allowed: int, n: int, rate: float, confidence: float) -> bool:
    """Whether `allowed` failures of `n` put the exact upper bound below `rate`.

    The Clopper-Pearson bound is below `rate` exactly when `allowed` or fewer failures
    are less likely than 1 - confidence at that rate; this asks it without scipy, so
    validating a scenario (which needs this count) stays light."""
    # A bound that equals the rate does not prove it below: a hair of margin keeps an
    # exact tie (0 of 2 at 90%, 99% confidence) from passing on rounding.
    return allowed < n and _binomial_cdf(allowed, n, rate) < (1 - confidence) * (1 - 1e-9)


def required_measured(prove_below: float, allowed: int = 0, confidence: float = 0.95,
                      limit: int = 100_000_000) -> int | None:
    """The fewest measured requests whose upper bound, at `allowed` failures, is below
    `prove_below`: what a candidate must measure before its pass can prove the rate.

    None when even `limit` requests would not do (an `allowed` too large for the rate)."""
    if not 0 < prove_below < 1:
        raise ValueError("prove_below must be between 0 and 1")
    lo, hi = allowed + 1, allowed + 1
    while not _proves(allowed, hi, prove_below, confidence):
        if hi >= limit:
            return None
        lo, hi = hi + 1, min(limit, hi * 2)
    while lo < hi:  # the bound falls as n grows: bisect for the first n below
        mid = (lo + hi) // 2
        if _proves(allowed, mid, prove_below, confidence):
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
    # P(X > allowed) for X ~ Binomial(n, p) equals the Beta(allowed+1, n-allowed) CDF at p.
    return _beta_quantile(power, allowed + 1, n - allowed)
