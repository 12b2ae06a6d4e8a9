"""The soak history as a trend: a table per round, a table per vLLM version, one plot.

A round's bound says how bad it could be given what it measured; pooled per vLLM
version, clean rounds add up to a bound a single round cannot reach (8 clean rounds
of 512 bound the rate below 0.07%, one round only below 0.6%).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
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


def round_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="soak rounds (oldest first)", box=box.SIMPLE_HEAD,
                  caption="bound: one-sided 95% Clopper-Pearson upper bound on the rate")
    for name, justify in (("soak", "left"), ("round", "right"), ("started", "left"),
                          ("status", "left"), ("vLLM", "left"), ("layout", "left"),
                          ("primed", "right"), ("measured", "right"), ("failed", "right"),
                          ("rate", "right"), ("bound", "right"), ("TTFT p50", "right"),
                          ("e2e p99", "right"), ("exit", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in rows:
        table.add_row(
            r["soak_id"], str(r["round"]), _when(r["started"]), r["status"],
            r.get("vllm_version") or UNKNOWN, r.get("c128a_layout") or UNKNOWN,
            str(r.get("priming") or 0), str(r.get("measured") if r.get("measured") is not None
                                            else "-"),
            str(r.get("gated_failures") if r.get("gated_failures") is not None else "-"),
            _pct(failure_rate(r)), _pct(r.get("upper_bound_95")), _sec(r.get("ttft_p50")),
            _sec(r.get("e2e_p99")), "-" if r.get("exit_code") is None else str(r["exit_code"]))
    return table


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
    return c if c.is_terminal else Console(width=200)
