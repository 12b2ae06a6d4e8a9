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

from collections.abc import Callable, Sequence
from typing import Any

from loadgen.bounds import upper_bound
from loadgen.exit_codes import ExitCode
from loadgen.history.statuses import RoundStatus

UNKNOWN = "unknown"

#: What a round counts as: its status, and for a complete round whether its gate held.
RUNNING, PARTIAL, COMPLETE = RoundStatus.RUNNING, RoundStatus.PARTIAL, RoundStatus.COMPLETE
INVALID = "invalid"  # ran to its end, but exit 2 or no gate: never pooled


def round_outcome(row: dict[str, Any]) -> str:
    """running, partial, invalid (ran to its end, exit 2 or no gate), or complete."""
    if row.get("status") == RUNNING:
        return RUNNING
    if row.get("status") != COMPLETE:
        return PARTIAL
    if row.get("exit_code") in (ExitCode.PASSED, ExitCode.GATE_FAILED):
        return COMPLETE
    return INVALID


def is_pooled(row: dict[str, Any]) -> bool:
    """Whether the round's counts enter pooled figures: complete, valid, measured."""
    return round_outcome(row) == COMPLETE and bool(row.get("measured"))


def _image(row: dict[str, Any]) -> str | None:
    image, digest = row.get("image"), row.get("image_digest")
    if image and digest:
        return f"{image}@{digest}"
    return image or digest


#: `history --group-by` / filter names -> the value a round has for it.
GROUP_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "host": lambda r: r.get("host"),
    "gpu": lambda r: r.get("gpu_name"),
    "gpu-count": lambda r: r.get("gpu_count"),
    "driver": lambda r: r.get("gpu_driver"),
    "vllm": lambda r: r.get("vllm_version"),
    "image": _image,
    "model": lambda r: r.get("model"),
    "revision": lambda r: r.get("model_revision"),
    "layout": lambda r: r.get("c128a_layout"),
    "scenario": lambda r: r.get("scenario"),
    "scenario-hash": lambda r: r.get("scenario_hash"),
    "soak": lambda r: r.get("soak_id"),
}


def key_value(row: dict[str, Any], key: str) -> str:
    value = GROUP_KEYS[key](row)
    return UNKNOWN if value is None or value == "" else str(value)


def matches(row: dict[str, Any], filters: dict[str, str]) -> bool:
    """Every filter matches: equal, `unknown` for a fact not recorded; a scenario hash or
    an image digest may be given by its first characters, as the tables show it."""
    for key, wanted in filters.items():
        value = key_value(row, key)
        if value == wanted:
            continue
        if key == "scenario-hash" and len(wanted) >= 6 and value.startswith(wanted):
            continue
        digest = row.get("image_digest") or ""
        if key == "image" and wanted in (row.get("image"), digest,
                                         digest.removeprefix("sha256:")):
            continue
        return False
    return True


def filter_rounds(rows: list[dict[str, Any]], filters: dict[str, str],
                  last: int | None = None) -> list[dict[str, Any]]:
    kept = [r for r in rows if matches(r, filters)]
    return kept[-last:] if last else kept


def per_group(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Valid rounds pooled per value of `keys` (in the order first seen); invalid and
    partial rounds are counted beside, never in, the pooled figures."""
    groups: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in rows:
        outcome = round_outcome(r)
        if outcome == RUNNING:
            continue
        value = tuple(key_value(r, k) for k in keys)
        g = groups.setdefault(value, {"group": dict(zip(keys, value, strict=True)),
                                      "rounds": 0, "measured": 0, "failures": 0,
                                      "invalid": 0, "partial": 0, "layouts": set()})
        if outcome in (INVALID, PARTIAL):
            g[outcome] += 1
            continue
        if not r.get("measured"):
            continue
        g["rounds"] += 1
        g["measured"] += r["measured"]
        g["failures"] += r.get("gated_failures") or 0
        if r.get("c128a_layout"):
            g["layouts"].add(r["c128a_layout"])
    out = []
    for g in groups.values():
        measured, failures = g["measured"], g["failures"]
        out.append({**g, "layouts": sorted(g["layouts"]),
                    "failure_rate": failures / measured if measured else None,
                    "upper_bound_95": upper_bound(failures, measured) if measured else None})
    return out


def per_version(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Valid rounds pooled per vLLM version (the `versions` of `history --json`)."""
    return [{"vllm_version": g["group"]["vllm"], **{k: v for k, v in g.items() if k != "group"}}
            for g in per_group(rows, ["vllm"])]


def failure_rate(row: dict[str, Any]) -> float | None:
    measured = row.get("measured") or 0
    return (row.get("gated_failures") or 0) / measured if measured else None
