"""The soak history as a trend: a table per round, a table per vLLM version, one plot.

A round's bound says how bad it could be given what it measured; pooled per vLLM
version, clean rounds add up to a bound a single round cannot reach (8 clean rounds
of 512 bound the rate below 0.07%, one round only below 0.6%).
"""

from __future__ import annotations

import io
import os
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table

from loadgen.bounds import upper_bound
from loadgen.report.figures import png_bytes, pyplot

UNKNOWN = "unknown"


def _pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _sec(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t).strftime("%m-%d %H:%M")


def failure_rate(row: dict[str, Any]) -> float | None:
    measured = row.get("measured") or 0
    return (row.get("gated_failures") or 0) / measured if measured else None


#: (header, justify, cell) of the round table, in the order shown.
_Column = tuple[str, str, Callable[[dict[str, Any]], str]]
_ROUND_COLUMNS: list[_Column] = [
    ("soak", "left", lambda r: r["soak_id"]),
    ("round", "right", lambda r: str(r["round"])),
    ("started", "left", lambda r: _when(r["started"])),
    ("status", "left", lambda r: r["status"]),
    ("vLLM", "left", lambda r: r.get("vllm_version") or UNKNOWN),
    ("layout", "left", lambda r: r.get("c128a_layout") or UNKNOWN),
    ("primed", "right", lambda r: str(r.get("priming") or 0)),
    ("failed", "right", lambda r: "-" if r.get("measured") is None
     else f"{r.get('gated_failures') or 0}/{r['measured']}"),
    ("rate", "right", lambda r: _pct(failure_rate(r))),
    ("bound", "right", lambda r: _pct(r.get("upper_bound_95"))),
    ("TTFT p50", "right", lambda r: _sec(r.get("ttft_p50"))),
    ("e2e p99", "right", lambda r: _sec(r.get("e2e_p99"))),
    ("exit", "right", lambda r: "-" if r.get("exit_code") is None else str(r["exit_code"])),
]
#: What goes first where the terminal is narrow (`--json` always has every field); the
#: rest is what a release manager reads off a round.
_DROP_FIRST = ("e2e p99", "TTFT p50", "primed", "rate")
_CAPTION = "failed: gated failures / measured; bound: one-sided 95% Clopper-Pearson upper " \
    "bound on the rate"


def round_table(rows: list[dict[str, Any]], width: int | None = None) -> RenderableType:
    """One line per round, no wider than `width` (None: every column in one table).

    Where one table with a soak column does not fit, each soak gets its own table under
    its id, and the latency, priming and rate columns go, in that order, until it fits.
    """
    soaks = list(dict.fromkeys(r["soak_id"] for r in rows))
    shown = [c for c in _ROUND_COLUMNS if c[0] != "soak" or len(soaks) > 1]
    whole = _table(_title(soaks), rows, shown, _CAPTION)
    if width is None or _width(whole) <= width:
        return whole
    shown = [c for c in _ROUND_COLUMNS if c[0] != "soak"]
    dropped: list[str] = []
    for name in _DROP_FIRST:
        if _width(_table("", rows, shown, None)) <= width:
            break
        shown = [c for c in shown if c[0] != name]
        dropped.append(name)
    caption = _CAPTION + (f"; {', '.join(dropped)}: a wider terminal or --json"
                          if dropped else "")
    return Group(*(_table(_title([soak]), [r for r in rows if r["soak_id"] == soak], shown,
                          caption if i == len(soaks) - 1 else None)
                   for i, soak in enumerate(soaks)))


def _title(soaks: list[str]) -> str:
    return f"soak {soaks[0]}: rounds, oldest first" if len(soaks) == 1 else \
        "soak rounds (oldest first)"


def _table(title: str, rows: list[dict[str, Any]], columns: list[_Column],
           caption: str | None) -> Table:
    table = Table(title=title or None, box=box.SIMPLE_HEAD, caption=caption, pad_edge=False,
                  padding=(0, 1, 0, 0))
    for name, justify, _ in columns:
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in rows:
        table.add_row(*(cell(r) for _, _, cell in columns))
    return table


def _width(table: Table) -> int:
    """The table's natural width: what it takes with no column cut."""
    return Console(width=10_000, file=io.StringIO()).measure(table).maximum


def per_version(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Measured rounds pooled per vLLM version (partial rounds count what they measured)."""
    pooled: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"rounds": 0, "measured": 0, "failures": 0, "layouts": set()})
    for r in rows:
        if not r.get("measured"):
            continue
        p = pooled[r.get("vllm_version") or UNKNOWN]
        p["rounds"] += 1
        p["measured"] += r["measured"]
        p["failures"] += r.get("gated_failures") or 0
        if r.get("c128a_layout"):
            p["layouts"].add(r["c128a_layout"])
    out = []
    for version, p in pooled.items():
        out.append({"vllm_version": version, "rounds": p["rounds"], "measured": p["measured"],
                    "failures": p["failures"], "layouts": sorted(p["layouts"]),
                    "failure_rate": p["failures"] / p["measured"],
                    "upper_bound_95": upper_bound(p["failures"], p["measured"])})
    return out


def version_table(versions: list[dict[str, Any]]) -> Table:
    table = Table(title="per vLLM version (rounds pooled)", box=box.SIMPLE_HEAD)
    for name in ("vLLM", "layouts", "rounds", "measured", "failed", "rate", "bound"):
        table.add_column(name, justify="left" if name in ("vLLM", "layouts") else "right",
                         no_wrap=True)
    for v in versions:
        table.add_row(v["vllm_version"], ", ".join(v["layouts"]) or UNKNOWN, str(v["rounds"]),
                      str(v["measured"]), str(v["failures"]), _pct(v["failure_rate"]),
                      _pct(v["upper_bound_95"]))
    return table


def write_trend_plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Failure rate and its 95% bound per round (colour: vLLM version), and per version."""
    plt = pyplot()
    versions = per_version(rows)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 3.6),
                                 gridspec_kw={"width_ratios": [3, 1]})
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {v["vllm_version"]: palette[i % len(palette)] for i, v in enumerate(versions)}
    for version in colour:
        pts = [(i, r) for i, r in enumerate(rows)
               if (r.get("vllm_version") or UNKNOWN) == version and r.get("measured")]
        if not pts:
            continue
        xs = [i for i, _ in pts]
        rates = [100 * (failure_rate(r) or 0) for _, r in pts]
        bounds = [100 * (r.get("upper_bound_95") or 0) for _, r in pts]
        ax.plot(xs, rates, "o", color=colour[version], label=f"{version}: failure rate")
        ax.vlines(xs, rates, bounds, color=colour[version], alpha=0.5)
        ax.plot(xs, bounds, "_", markersize=12, color=colour[version],
                label=f"{version}: 95% upper bound")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([str(r["round"]) for r in rows], fontsize=7)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("round (oldest first)")
    ax.set_ylabel("% of measured requests")
    ax.set_title("per round")
    if versions:
        ax.legend(fontsize=7)
    names = [v["vllm_version"] for v in versions]
    bx.bar(names, [100 * v["failure_rate"] for v in versions],
           color=[colour[n] for n in names], label="failure rate")
    bx.errorbar(names, [100 * v["failure_rate"] for v in versions],
                yerr=[[0] * len(versions),
                      [100 * ((v["upper_bound_95"] or 0) - v["failure_rate"]) for v in versions]],
                fmt="none", ecolor="#333", capsize=6, label="95% upper bound")
    bx.set_title("per vLLM version (pooled)")
    bx.tick_params(axis="x", labelsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(fig))


def console() -> Console:
    """The terminal's width on a terminal; wide enough for the table in CI logs."""
    c = Console()
    if c.is_terminal or os.environ.get("COLUMNS"):
        return c
    return Console(width=200)
