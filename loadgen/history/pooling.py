"""Which rounds count, and how they are pooled, filtered and grouped.

A round's failure rate is a finding about the server only when the round was valid
and ran to its end. An invalid round (exit 2: the server went away, too many
infrastructure errors, receipts missing) measured an outage or a setup, and a partial
one (interrupted, or its process died) measured a cut: neither enters a pooled rate or
bound, a change point or a version's totals. They are shown, as what they are.

Pooled over valid rounds, clean rounds add up to a bound a single round cannot reach
(8 clean rounds of 512 bound the rate below 0.07%, one round only below 0.6%).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadgen.bounds import upper_bound
from loadgen.exit_codes import ExitCode
from loadgen.history.rows import RoundRow
from loadgen.history.statuses import RoundStatus

UNKNOWN = "unknown"

#: What a round counts as: its status, and for a complete round whether its gate held.
RUNNING, PARTIAL, COMPLETE = RoundStatus.RUNNING, RoundStatus.PARTIAL, RoundStatus.COMPLETE
INVALID = "invalid"  # ran to its end, but exit 2 or no gate: never pooled


def round_outcome(row: RoundRow) -> str:
    """running, partial, invalid (ran to its end, exit 2 or no gate), or complete."""
    if row.status == RUNNING:
        return RUNNING
    if row.status != COMPLETE:
        return PARTIAL
    if row.exit_code in (ExitCode.PASSED, ExitCode.GATE_FAILED):
        return COMPLETE
    return INVALID


def is_pooled(row: RoundRow) -> bool:
    """Whether the round's counts enter pooled figures: complete, valid, measured."""
    return round_outcome(row) == COMPLETE and bool(row.measured)


def _image(row: RoundRow) -> str | None:
    image, digest = row.image, row.image_digest
    if image and digest:
        return f"{image}@{digest}"
    return image or digest


#: `history --group-by` / filter names -> the value a round has for it.
GROUP_KEYS: dict[str, Callable[[RoundRow], Any]] = {
    "host": lambda r: r.host,
    "gpu": lambda r: r.gpu_name,
    "gpu-count": lambda r: r.gpu_count,
    "driver": lambda r: r.gpu_driver,
    "vllm": lambda r: r.vllm_version,
    "image": _image,
    "model": lambda r: r.model,
    "revision": lambda r: r.model_revision,
    "layout": lambda r: r.c128a_layout,
    "scenario": lambda r: r.scenario,
    "scenario-hash": lambda r: r.scenario_hash,
    "soak": lambda r: r.soak_id,
}


def key_value(row: RoundRow, key: str) -> str:
    value = GROUP_KEYS[key](row)
    return UNKNOWN if value is None or value == "" else str(value)


def matches(row: RoundRow, filters: dict[str, str]) -> bool:
    """Every filter matches: equal, `unknown` for a fact not recorded; a scenario hash or
    an image digest may be given by its first characters, as the tables show it."""
    for key, wanted in filters.items():
        value = key_value(row, key)
        if value == wanted:
            continue
        if key == "scenario-hash" and len(wanted) >= 6 and value.startswith(wanted):
            continue
        digest = row.image_digest or ""
        if key == "image" and wanted in (row.image, digest, digest.removeprefix("sha256:")):
            continue
        return False
    return True


def unknown_filter(rows: list[RoundRow], filters: dict[str, str | None],
                   names: dict[str, list[str]] | None = None) -> tuple[str, bool] | None:
    """A filter value no round of `rows` (the whole history) has: (what to say, whether
    it is a typo). A typo is a value close to one the history (or `names`: e.g. the
    shipped scenarios) knows, and is bad input; any other value only matches nothing
    yet (a release no node has run). None when every filter names something the
    history holds, or the history is empty.

    A typo must not read as "no data": `--scenario sim-smok` of a history of `sim-smoke`
    rounds says so, instead of empty tables or a fleet in which no node reported."""
    if not rows:
        return None
    for key, wanted in filters.items():
        if wanted is None or any(matches(r, {key: wanted}) for r in rows):
            continue
        known = sorted({key_value(r, key) for r in rows})
        listed = ", ".join(known[:12]) + (f" and {len(known) - 12} more"
                                          if len(known) > 12 else "")
        if wanted in (names or {}).get(key, ()):
            return f"--{key} {wanted!r}: no round of this history has it yet; it has {listed}", \
                False
        candidates = sorted({*known, *(names or {}).get(key, ())})
        close = difflib.get_close_matches(wanted, candidates, n=1, cutoff=0.75)
        if close:
            return (f"--{key} {wanted!r}: no round of this history has it (did you mean "
                    f"{close[0]!r}?); it has {listed}", True)
        return f"--{key} {wanted!r}: no round of this history has it; it has {listed}", False
    return None


def filter_rounds(rows: list[RoundRow], filters: dict[str, str],
                  last: int | None = None) -> list[RoundRow]:
    kept = [r for r in rows if matches(r, filters)]
    return kept[-last:] if last else kept


@dataclass
class Pool:
    """Valid rounds pooled for one value of the grouping keys, and what was left out."""

    group: dict[str, str]
    rounds: int = 0
    measured: int = 0
    failures: int = 0
    invalid: int = 0
    partial: int = 0
    layouts: list[str] = field(default_factory=list)

    @property
    def failure_rate(self) -> float | None:
        return self.failures / self.measured if self.measured else None

    @property
    def upper_bound_95(self) -> float | None:
        return upper_bound(self.failures, self.measured) if self.measured else None

    @property
    def vllm_version(self) -> str:
        """The version a pool of `per_version` is of."""
        return self.group["vllm"]

    def left_out(self, outcome: str) -> int:
        """Rounds of this group not pooled because they were `outcome` (invalid, partial)."""
        return self.invalid if outcome == INVALID else self.partial

    def to_dict(self) -> dict[str, Any]:
        """A group of `history --json`'s `groups`."""
        return {"group": dict(self.group), **self._figures()}

    def version_dict(self) -> dict[str, Any]:
        """A version of `history --json`'s `versions`."""
        return {"vllm_version": self.vllm_version, **self._figures()}

    def _figures(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "measured": self.measured, "failures": self.failures,
                "invalid": self.invalid, "partial": self.partial,
                "layouts": list(self.layouts), "failure_rate": self.failure_rate,
                "upper_bound_95": self.upper_bound_95}


def per_group(rows: Sequence[RoundRow], keys: Sequence[str]) -> list[Pool]:
    """Valid rounds pooled per value of `keys` (in the order first seen); invalid and
    partial rounds are counted beside, never in, the pooled figures."""
    groups: dict[tuple[str, ...], Pool] = {}
    layouts: dict[tuple[str, ...], set[str]] = {}
    for r in rows:
        outcome = round_outcome(r)
        if outcome == RUNNING:
            continue
        value = tuple(key_value(r, k) for k in keys)
        g = groups.setdefault(value, Pool(group=dict(zip(keys, value, strict=True))))
        seen = layouts.setdefault(value, set())
        if outcome == INVALID:
            g.invalid += 1
            continue
        if outcome == PARTIAL:
            g.partial += 1
            continue
        if not r.measured:
            continue
        g.rounds += 1
        g.measured += r.measured
        g.failures += r.gated_failures or 0
        if r.c128a_layout:
            seen.add(r.c128a_layout)
    for value, g in groups.items():
        g.layouts = sorted(layouts[value])
    return list(groups.values())


def per_version(rows: Sequence[RoundRow]) -> list[Pool]:
    """Valid rounds pooled per vLLM version (the `versions` of `history --json`)."""
    return per_group(rows, ["vllm"])


def failure_rate(row: RoundRow) -> float | None:
    measured = row.measured or 0
    return (row.gated_failures or 0) / measured if measured else None
