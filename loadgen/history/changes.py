"""Change points in the failure rate: across rounds, and across vLLM versions.

A round's bound says whether that round passed; it does not say that last Tuesday the
rate of one node's rounds went from 0.1% to 2%, nor that 0.28.1 fails more than 0.28.0
did. Both are change points in a series of (failed, measured) counts, found here with
ruptures' PELT search (Killick et al. 2012: the optimal segmentation under a penalty,
in linear time) and a cost written for counts: the binomial deviance of a segment at
its pooled rate. Rounds of 64 and of 512 requests then weigh what they measured, and
two failures of 64 are not mistaken for a jump.

Penalty: one change point must buy more deviance than BIC charges for the two numbers
it adds (where, and the new rate): 2 ln N, N the requests measured in the series. With
512-request rounds a rate going from 0% to 2% over five rounds is found; rounds that
scatter around one rate are not split.

Only valid rounds take part: an invalid or partial round measured something other than
the server's failure rate (an outage, a cut), and is shown, never pooled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ruptures as rpt
from ruptures.base import BaseCost

from loadgen.history.pooling import Pool
from loadgen.history.rows import RoundRow

#: Facts reported with a change point when they differ across it (what changed then).
FACT_KEYS = ("vllm_version", "c128a_layout", "image", "image_digest", "host", "gpu_name",
             "gpu_count", "gpu_driver", "model", "model_revision", "scenario_hash")


class BinomialCost(BaseCost):
    """-2 log-likelihood of a segment's counts at their pooled rate (binomial deviance)."""

    model = "binomial"
    min_size = 1

    def fit(self, signal: np.ndarray) -> BinomialCost:
        """`signal`: rows of (failed, measured)."""
        counts = np.asarray(signal, dtype=float).reshape(-1, 2)
        self.signal = counts
        self.failed = np.concatenate([[0.0], np.cumsum(counts[:, 0])])
        self.measured = np.concatenate([[0.0], np.cumsum(counts[:, 1])])
        return self

    def error(self, start: int, end: int) -> float:
        k = self.failed[end] - self.failed[start]
        n = self.measured[end] - self.measured[start]
        return -2.0 * _log_likelihood(k, n)


def _log_likelihood(k: float, n: float) -> float:
    if n <= 0 or k <= 0 or k >= n:
        return 0.0  # 0 or n failures: the pooled rate explains them exactly
    p = k / n
    return k * math.log(p) + (n - k) * math.log(1 - p)


def penalty(measured: int) -> float:
    """BIC for the two parameters a change point adds, over the requests measured."""
    return 2.0 * math.log(max(measured, 2))


def segments(counts: Sequence[tuple[int, int]]) -> list[int]:
    """Where new segments start (indices into `counts`), the first excluded."""
    if len(counts) < 2:
        return []
    signal = np.array(counts, dtype=float)
    if signal[:, 1].sum() <= 0:
        return []
    algo = rpt.Pelt(custom_cost=BinomialCost(), min_size=1, jump=1).fit(signal)
    ends = algo.predict(pen=penalty(int(signal[:, 1].sum())))
    return [e for e in ends[:-1]]


@dataclass(frozen=True)
class Side:
    """One side of a change point: its items (rounds or versions) pooled."""

    items: int
    measured: int
    failures: int
    versions: list[str] | None = None  # a change across versions: the versions on this side

    @property
    def failure_rate(self) -> float | None:
        return self.failures / self.measured if self.measured else None

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"items": self.items, "measured": self.measured,
                               "failures": self.failures, "failure_rate": self.failure_rate}
        if self.versions is not None:
            doc["versions"] = list(self.versions)
        return doc


def _rounds_side(rows: Sequence[RoundRow]) -> Side:
    return Side(items=len(rows), measured=sum(int(r.measured or 0) for r in rows),
                failures=sum(int(r.gated_failures or 0) for r in rows))


def _versions_side(pools: Sequence[Pool]) -> Side:
    return Side(items=len(pools), measured=sum(p.measured for p in pools),
                failures=sum(p.failures for p in pools),
                versions=[p.vllm_version for p in pools])


@dataclass(frozen=True)
class RoundChange:
    """A change point in one series of rounds: the first round after it, the rates
    pooled over each side's segment, the facts that differ across it."""

    series: str
    soak_id: str
    round: int | str
    started: float
    before: Side
    after: Side
    changed: dict[str, list[Any]] = field(default_factory=dict)  # fact -> [before, after]

    def to_dict(self) -> dict[str, Any]:
        return {"series": self.series, "soak_id": self.soak_id, "round": self.round,
                "started": self.started, "before": self.before.to_dict(),
                "after": self.after.to_dict(),
                "changed": {k: list(v) for k, v in self.changed.items()}}


@dataclass(frozen=True)
class VersionChange:
    """A change point across vLLM versions (in the order first seen)."""

    from_version: str
    to_version: str
    before: Side
    after: Side

    def to_dict(self) -> dict[str, Any]:
        return {"from_version": self.from_version, "to_version": self.to_version,
                "before": self.before.to_dict(), "after": self.after.to_dict()}


@dataclass(frozen=True)
class ChangePoints:
    """What `history` found, and how it looked."""

    method: str
    series_by: list[str]
    rounds: list[RoundChange]
    versions: list[VersionChange]

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "series_by": list(self.series_by),
                "rounds": [c.to_dict() for c in self.rounds],
                "versions": [c.to_dict() for c in self.versions]}


def round_change_points(rounds: Sequence[RoundRow], series_of: Callable[[RoundRow], str]
                        ) -> list[RoundChange]:
    """Change points in each series of valid rounds (oldest first), series by `series_of`."""
    by_series: dict[str, list[RoundRow]] = {}
    for r in rounds:
        by_series.setdefault(series_of(r), []).append(r)
    found = []
    for series, rows in by_series.items():
        counts = [(int(r.gated_failures or 0), int(r.measured or 0)) for r in rows]
        starts = segments(counts)
        bounds = [0, *starts, len(rows)]
        for i, at in enumerate(starts):
            first = rows[at]
            found.append(RoundChange(
                series=series, soak_id=first.soak_id, round=first.round,
                started=first.started, before=_rounds_side(rows[bounds[i]:at]),
                after=_rounds_side(rows[at:bounds[i + 2]]),
                changed=_changed(rows[at - 1], first)))
    return sorted(found, key=lambda c: c.started)


def version_change_points(versions: Sequence[Pool]) -> list[VersionChange]:
    """Change points over the versions' pooled counts, in the order they were first seen."""
    counts = [(v.failures, v.measured) for v in versions]
    starts = segments(counts)
    bounds = [0, *starts, len(versions)]
    return [VersionChange(from_version=versions[at - 1].vllm_version,
                          to_version=versions[at].vllm_version,
                          before=_versions_side(versions[bounds[i]:at]),
                          after=_versions_side(versions[at:bounds[i + 2]]))
            for i, at in enumerate(starts)]


def _changed(last: RoundRow, first: RoundRow) -> dict[str, list[Any]]:
    return {k: [getattr(last, k), getattr(first, k)] for k in FACT_KEYS
            if getattr(last, k) != getattr(first, k)}
