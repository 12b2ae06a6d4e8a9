"""Are the failures spread evenly over the run, and what a clean run therefore proves.

The Clopper-Pearson bound of a run treats its requests as independent trials. #52448's
failures were not: the reporter's server was clean for its first ~256 requests and then
failed up to 67% of them. So the measured requests are cut into buckets of request
order and two questions are asked of the failures, each by a permutation test (exact
enough for a handful of failures, where a chi-square approximation is not): do they
cluster in some buckets (homogeneity), and does their rate climb or fall with order
(Cochran-Armitage trend)? When either says so at 5%, the report says plainly that the
bound holds for this run's history only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loadgen.judge.gate.aggregate import TimelinePoint

BUCKETS = 8
PERMUTATIONS = 4000
UNEVEN_P = 0.05
_SEED = 52448  # the same records give the same p-values, report after report


@dataclass
class Bucket:
    first_seq: int
    requests: int
    failures: int


@dataclass
class FailureSpread:
    buckets: list[Bucket] = field(default_factory=list)
    failures: int = 0
    requests: int = 0
    p_uneven: float | None = None  # homogeneity across buckets
    p_trend: float | None = None  # a rate that climbs (or falls) with request order
    direction: str | None = None  # "rising" or "falling", with the trend

    @property
    def uneven(self) -> bool:
        return any(p is not None and p < UNEVEN_P for p in (self.p_uneven, self.p_trend))

    def to_dict(self) -> dict[str, Any]:
        return {"buckets": [b.__dict__ for b in self.buckets], "failures": self.failures,
                "requests": self.requests, "p_uneven": self.p_uneven,
                "p_trend": self.p_trend, "direction": self.direction, "uneven": self.uneven,
                "statement": self.statement()}

    def statement(self) -> str:
        if self.failures == 0:
            return "no failure: nothing to spread"
        if self.uneven:
            how = (f"their rate is {self.direction} with request order (p={self.p_trend:.3g})"
                   if self.p_trend is not None and self.p_trend < UNEVEN_P
                   else f"they cluster in part of the run (p={self.p_uneven:.3g})")
            return (f"failures are NOT spread evenly over the run: {how}; the bound holds "
                    "for this run's history only")
        return (f"failures are spread evenly over the run as far as {self.failures} can show "
                f"(p={min(self.p_uneven or 1.0, self.p_trend or 1.0):.3g})")


def failure_spread(timeline: list[TimelinePoint], buckets: int = BUCKETS) -> FailureSpread:
    """The spread of `timeline`'s failures over request order (measured requests only)."""
    points = sorted(timeline, key=lambda p: p.seq)
    n = len(points)
    failed = np.array([p.failed for p in points], dtype=bool)
    k = max(1, min(buckets, n // 4))
    edges = np.linspace(0, n, k + 1).astype(int)
    index = np.repeat(np.arange(k), np.diff(edges))
    sizes = np.diff(edges)
    observed = np.bincount(index[failed], minlength=k)
    spread = FailureSpread(
        buckets=[Bucket(points[a].seq, int(b - a), int(f))
                 for a, b, f in zip(edges[:-1], edges[1:], observed, strict=True) if b > a],
        failures=int(failed.sum()), requests=n)
    if spread.failures == 0 or spread.failures == n or k < 2:
        return spread
    rng = np.random.default_rng(_SEED)
    # The failures dealt at random over the run ("no order"): their bucket counts follow
    # the multivariate hypergeometric law, drawn directly (no shuffle of n positions).
    counts = rng.multivariate_hypergeometric(sizes, spread.failures, size=PERMUTATIONS)
    expected = sizes * spread.failures / n
    chi = ((counts - expected) ** 2 / expected).sum(axis=1)
    chi_obs = ((observed - expected) ** 2 / expected).sum()
    spread.p_uneven = float((1 + (chi >= chi_obs - 1e-9).sum()) / (1 + PERMUTATIONS))
    centred = np.arange(k) - (np.arange(k) * sizes).sum() / n
    trend = ((counts - expected) * centred).sum(axis=1)
    trend_obs = float(((observed - expected) * centred).sum())
    spread.p_trend = float((1 + (np.abs(trend) >= abs(trend_obs) - 1e-9).sum())
                           / (1 + PERMUTATIONS))
    spread.direction = "rising" if trend_obs > 0 else "falling"
    return spread
