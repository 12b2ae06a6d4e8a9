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
from typing import Any

import numpy as np
import ruptures as rpt
from ruptures.base import BaseCost

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


def _pool(items: Sequence[dict[str, Any]], failed: Callable[[dict[str, Any]], int],
          measured: Callable[[dict[str, Any]], int]) -> dict[str, Any]:
    f = sum(failed(i) for i in items)
    n = sum(measured(i) for i in items)
    return {"items": len(items), "measured": n, "failures": f,
            "failure_rate": f / n if n else None}


def round_change_points(rounds: Sequence[dict[str, Any]],
                        series_of: Callable[[dict[str, Any]], str]
                        ) -> list[dict[str, Any]]:
    """Change points in each series of valid rounds (oldest first), series by `series_of`.

    Each: the series, the first round after the change (soak, round, started), the
    rates before and after (pooled over each side's whole segment), and the facts that
    differ between the last round before and the first after."""
    by_series: dict[str, list[dict[str, Any]]] = {}
    for r in rounds:
        by_series.setdefault(series_of(r), []).append(r)
    found = []
    for series, rows in by_series.items():
        counts = [(int(r.get("gated_failures") or 0), int(r["measured"])) for r in rows]
        starts = segments(counts)
        bounds = [0, *starts, len(rows)]
        for i, at in enumerate(starts):
            before = rows[bounds[i]:at]
            after = rows[at:bounds[i + 2]]
            first = rows[at]
            found.append({
                "series": series,
                "soak_id": first["soak_id"], "round": first["round"],
                "started": first["started"],
                "before": _pool(before, lambda r: int(r.get("gated_failures") or 0),
                                lambda r: int(r["measured"])),
                "after": _pool(after, lambda r: int(r.get("gated_failures") or 0),
                               lambda r: int(r["measured"])),
                "changed": _changed(rows[at - 1], first),
            })
    return sorted(found, key=lambda c: c["started"])


def version_change_points(versions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Change points over the versions' pooled counts, in the order they were first seen.

    Each: the versions on either side of the change, and the rates pooled over each
    side's segment."""
    counts = [(int(v["failures"]), int(v["measured"])) for v in versions]
    starts = segments(counts)
    bounds = [0, *starts, len(versions)]
    found = []
    for i, at in enumerate(starts):
        before, after = versions[bounds[i]:at], versions[at:bounds[i + 2]]
        found.append({
            "from_version": versions[at - 1]["vllm_version"],
            "to_version": versions[at]["vllm_version"],
            "before": {**_pool(before, lambda v: int(v["failures"]),
                               lambda v: int(v["measured"])),
                       "versions": [v["vllm_version"] for v in before]},
            "after": {**_pool(after, lambda v: int(v["failures"]),
                              lambda v: int(v["measured"])),
                      "versions": [v["vllm_version"] for v in after]},
        })
    return found


def _changed(last: dict[str, Any], first: dict[str, Any]) -> dict[str, list[Any]]:
    return {k: [last.get(k), first.get(k)] for k in FACT_KEYS if last.get(k) != first.get(k)}
