"""The soak history as a trend: a table per round, per vLLM version (or group), the
change points, and one plot.

A round's bound says how bad it could be given what it measured; pooled per vLLM
version, valid rounds add up to a bound a single round cannot reach. Invalid and
partial rounds are listed as such (their status says it, their exit code matches) and
marked on the plot, never pooled (`history.pooling`).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table

from loadgen.history.changes import ChangePoints, RoundChange, Side
from loadgen.history.pooling import (
    INVALID,
    PARTIAL,
    UNKNOWN,
    Pool,
    failure_rate,
    is_pooled,
    key_value,
    per_group,
    round_outcome,
)
from loadgen.history.rows import RoundRow
from loadgen.report.figures import png_bytes, subplots

_HEX64 = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")


def _pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _sec(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t).strftime("%m-%d %H:%M")


#: (header, justify, cell) of the round table, in the order shown.
_Column = tuple[str, str, Callable[[RoundRow], str]]
_ROUND_COLUMNS: list[_Column] = [
    ("soak", "left", lambda r: r.soak_id),
    ("round", "right", lambda r: str(r.round)),
    ("started", "left", lambda r: _when(r.started)),
    ("host", "left", lambda r: r.host or UNKNOWN),
    ("status", "left", round_outcome),
    ("vLLM", "left", lambda r: r.vllm_version or UNKNOWN),
    ("layout", "left", lambda r: r.c128a_layout or UNKNOWN),
    ("primed", "right", lambda r: str(r.priming or 0)),
    ("failed", "right", lambda r: "-" if r.measured is None
     else f"{r.gated_failures or 0}/{r.measured}"),
    ("rate", "right", lambda r: _pct(failure_rate(r))),
    ("bound", "right", lambda r: _pct(r.upper_bound_95)),
    ("TTFT p50", "right", lambda r: _sec(r.ttft_p50)),
    ("e2e p99", "right", lambda r: _sec(r.e2e_p99)),
    ("exit", "right", lambda r: "-" if r.exit_code is None else str(r.exit_code)),
]
#: What goes first where the terminal is narrow (`--json` always has every field); the
#: rest is what a release manager reads off a round.
_DROP_FIRST = ("e2e p99", "TTFT p50", "primed", "rate", "host")
_CAPTION = "failed: gated failures / measured; bound: one-sided 95% Clopper-Pearson upper " \
    "bound on the rate; invalid (exit 2) and partial rounds are never pooled"


def round_table(rows: list[RoundRow], width: int | None = None) -> RenderableType:
    """One line per round, no wider than `width` (None: every column in one table).

    Where one table with a soak column does not fit, each soak gets its own table under
    its id, and the latency, priming and rate columns go, in that order, until it fits.
    """
    soaks = list(dict.fromkeys(r.soak_id for r in rows))
    # The host only where the rounds ran on more than one (a fleet's database).
    hosts = {r.host for r in rows}
    columns = [c for c in _ROUND_COLUMNS if c[0] != "host" or len(hosts) > 1]
    shown = [c for c in columns if c[0] != "soak" or len(soaks) > 1]
    whole = _table(_title(soaks), rows, shown, _CAPTION)
    if width is None or _width(whole) <= width:
        return whole
    shown = [c for c in columns if c[0] != "soak"]
    dropped: list[str] = []
    for name in _DROP_FIRST:
        if _width(_table("", rows, shown, None)) <= width:
            break
        shown = [c for c in shown if c[0] != name]
        dropped.append(name)
    caption = _CAPTION + (f"; {', '.join(dropped)}: a wider terminal or --json"
                          if dropped else "")
    return Group(*(_table(_title([soak]), [r for r in rows if r.soak_id == soak], shown,
                          caption if i == len(soaks) - 1 else None)
                   for i, soak in enumerate(soaks)))


def _title(soaks: list[str]) -> str:
    return f"soak {soaks[0]}: rounds, oldest first" if len(soaks) == 1 else \
        "soak rounds (oldest first)"


def _table(title: str, rows: list[RoundRow], columns: list[_Column],
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


def _left_out(g: Pool) -> str:
    parts = [f"{g.left_out(k)} {k}" for k in (INVALID, PARTIAL) if g.left_out(k)]
    return ", ".join(parts) or "-"


def version_table(versions: list[Pool]) -> Table:
    table = Table(title="per vLLM version (valid rounds pooled)", box=box.SIMPLE_HEAD)
    for name in ("vLLM", "layouts", "rounds", "measured", "failed", "rate", "bound",
                 "not pooled"):
        table.add_column(name, justify="left" if name in ("vLLM", "layouts") else "right",
                         no_wrap=True)
    for v in versions:
        table.add_row(v.vllm_version, ", ".join(v.layouts) or UNKNOWN, str(v.rounds),
                      str(v.measured), str(v.failures), _pct(v.failure_rate),
                      _pct(v.upper_bound_95), _left_out(v))
    return table


def group_table(groups: list[Pool], keys: list[str]) -> Table:
    """Valid rounds pooled per value of the --group-by keys."""
    table = Table(title=f"per {', '.join(keys)} (valid rounds pooled)", box=box.SIMPLE_HEAD)
    for key in keys:
        table.add_column(key, justify="left", no_wrap=True)
    for name in ("rounds", "measured", "failed", "rate", "bound", "not pooled"):
        table.add_column(name, justify="right", no_wrap=True)
    for g in groups:
        table.add_row(*(_short(g.group[k]) for k in keys), str(g.rounds),
                      str(g.measured), str(g.failures), _pct(g.failure_rate),
                      _pct(g.upper_bound_95), _left_out(g))
    return table


def _short(value: str) -> str:
    """Hashes and digests by their first 12 hex digits, as `--scenario-hash` takes them."""
    return _HEX64.sub(r"\1", value)


def _side(side: Side) -> str:
    return f"{_pct(side.failure_rate)} ({side.failures}/{side.measured})"


def change_table(changes: ChangePoints) -> RenderableType:
    """The change points found, across rounds and across versions (or a line: none)."""
    rounds, versions = changes.rounds, changes.versions
    if not rounds and not versions:
        return f"change points: none in the failure rate ({changes.method})"
    table = Table(title="change points in the failure rate (valid rounds)",
                  box=box.SIMPLE_HEAD, caption=changes.method)
    for name in ("where", "at", "before", "after", "what changed"):
        table.add_column(name, no_wrap=name != "what changed")
    for c in rounds:
        changed = "; ".join(f"{k} {_short(str(a))} -> {_short(str(b))}"
                            for k, (a, b) in c.changed.items()) or "nothing recorded"
        table.add_row(f"rounds of {c.series}", f"{c.soak_id} round {c.round} "
                      f"({_when(c.started)})", _side(c.before), _side(c.after), changed)
    for v in versions:
        table.add_row("vLLM versions", f"{v.from_version} -> {v.to_version}",
                      _side(v.before), _side(v.after),
                      f"versions {', '.join(v.before.versions or [])} | "
                      f"{', '.join(v.after.versions or [])}")
    return table


#: What a --group-by key is called on the plot.
KEY_WORDS = {"vllm": "vLLM version", "layout": "C128A layout", "gpu": "GPU",
             "gpu-count": "GPU count", "revision": "model revision",
             "scenario-hash": "scenario hash"}


def _group_words(keys: Sequence[str]) -> str:
    return ", ".join(KEY_WORDS.get(k, k) for k in keys)


def _group_label(values: dict[str, str], keys: Sequence[str]) -> str:
    return " / ".join(values[k] for k in keys)


def round_labels(rows: Sequence[RoundRow]) -> tuple[list[str], str]:
    """Each round's tick and the axis's name: the round number within one soak; across
    several soaks, `soak.round` (soaks numbered oldest first), so a number never
    repeats along the axis."""
    soaks: dict[str, int] = {}
    for r in rows:
        soaks.setdefault(r.soak_id, len(soaks) + 1)
    if len(soaks) <= 1:
        return [str(r.round) for r in rows], "round (oldest first)"
    return ([f"{soaks[r.soak_id]}.{r.round}" for r in rows],
            f"soak.round (oldest first; {len(soaks)} soaks)")


def trend_figure(rows: list[RoundRow], change_points: list[RoundChange] | None = None,
                 keys: Sequence[str] = ("vllm",)) -> Any:
    """Failure rate and its 95% bound per round (colour: its group of `keys`, the vLLM
    version by default), invalid and partial rounds marked (not pooled), change points
    as dashed lines, soaks apart; and the valid rounds pooled per group."""
    import matplotlib  # where a figure is drawn: `subplots` imported it

    keys = list(keys) or ["vllm"]
    groups = [g for g in per_group(rows, keys) if g.measured]
    fig, (ax, bx) = subplots(1, 2, figsize=(12, 3.6), gridspec_kw={"width_ratios": [3, 1]})
    palette = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = [_group_label(g.group, keys) for g in groups]
    colour = {label: palette[i % len(palette)] for i, label in enumerate(labels)}
    for label in colour:
        pts = [(i, r) for i, r in enumerate(rows)
               if is_pooled(r) and _group_label({k: key_value(r, k) for k in keys}, keys)
               == label]
        if not pts:
            continue
        xs = [i for i, _ in pts]
        rates = [100 * (failure_rate(r) or 0) for _, r in pts]
        bounds = [100 * (r.upper_bound_95 or 0) for _, r in pts]
        ax.plot(xs, rates, "o", color=colour[label], label=f"{label}: failure rate")
        ax.vlines(xs, rates, bounds, color=colour[label], alpha=0.5)
        ax.plot(xs, bounds, "_", markersize=12, color=colour[label],
                label=f"{label}: 95% upper bound")
    for outcome, marker, shade in ((INVALID, "X", "#d62728"), (PARTIAL, "x", "#7f7f7f")):
        xs = [i for i, r in enumerate(rows) if round_outcome(r) == outcome]
        if not xs:
            continue
        for i in xs:
            ax.axvspan(i - 0.4, i + 0.4, color=shade, alpha=0.12, linewidth=0)
        ax.plot(xs, [100 * (failure_rate(rows[i]) or 0) for i in xs], marker, color=shade,
                markersize=9, linestyle="none", label=f"{outcome} round (not pooled)")
    for i in range(1, len(rows)):
        if rows[i].soak_id != rows[i - 1].soak_id:
            ax.axvline(i - 0.5, color="#999", linestyle=":", linewidth=1)
    index = {(r.soak_id, r.round): i for i, r in enumerate(rows)}
    for n, c in enumerate(change_points or []):
        at = index.get((c.soak_id, c.round))
        if at is not None:
            ax.axvline(at - 0.5, color="#333", linestyle="--", linewidth=1,
                       label="change point" if n == 0 else None)
    ticks, axis_name = round_labels(rows)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(ticks, fontsize=7)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(axis_name)
    ax.set_ylabel("% of measured requests")
    ax.set_title("per round")
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=7)
    rates = [100 * (g.failure_rate or 0) for g in groups]
    bx.bar(labels, rates, color=[colour[n] for n in labels], label="failure rate")
    bx.errorbar(labels, rates,
                yerr=[[0] * len(groups),
                      [100 * (g.upper_bound_95 or 0) - r for g, r in zip(groups, rates,
                                                                       strict=True)]],
                fmt="none", ecolor="#333", capsize=6, label="95% upper bound")
    bx.set_title(f"per {_group_words(keys)} (valid rounds pooled)")
    bx.tick_params(axis="x", labelsize=7)
    return fig


def write_trend_plot(rows: list[RoundRow], path: Path,
                     change_points: list[RoundChange] | None = None,
                     keys: Sequence[str] = ("vllm",)) -> None:
    fig = trend_figure(rows, change_points, keys)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(fig))


def console() -> Console:
    """The terminal's width on a terminal; wide enough for the table in CI logs."""
    c = Console()
    if c.is_terminal or os.environ.get("COLUMNS"):
        return c
    return Console(width=200)
