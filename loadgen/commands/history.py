"""`dsv4-qual history DB`: the soak history's trend, as tables, change points and a plot.

DB is a node's SQLite file or the fleet's PostgreSQL URL. Rounds can be filtered by
what they ran on (host, GPU, driver, vLLM, image, model, revision, layout, scenario
hash) and pooled per any of those (`--group-by`); change points in the failure rate
are looked for in each group's rounds and across vLLM versions (`history.changes`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from loadgen.exit_codes import BadInputError
from loadgen.history import History, is_postgres
from loadgen.history.changes import ChangePoints, round_change_points, version_change_points
from loadgen.history.pooling import (
    Pool,
    filter_rounds,
    is_pooled,
    key_value,
    per_group,
    per_version,
    round_outcome,
    unknown_filter,
)
from loadgen.history.rows import RoundRow
from loadgen.report.trend import (
    change_table,
    console,
    group_table,
    round_table,
    version_table,
    write_trend_plot,
)
from loadgen.scenario import shipped_scenarios

DEFAULT_GROUP_BY = ("vllm",)
METHOD = ("ruptures PELT, binomial deviance of each segment's pooled rate, penalty "
          "2 ln(measured) per change; valid rounds only")


def default_plot(db: str | Path) -> Path:
    """Beside a SQLite file; for a database URL, in the current directory."""
    if is_postgres(db):
        name = str(db).rsplit("/", 1)[-1].split("?", 1)[0] or "history"
        return Path(f"{name}-trend.png")
    path = Path(db)
    return path.with_name(path.stem + "-trend.png")


@dataclass(frozen=True)
class Trend:
    """The rounds' figures: pooled per version and per group, and the change points."""

    rounds: list[RoundRow]
    versions: list[Pool]
    group_by: list[str]
    groups: list[Pool]
    change_points: ChangePoints

    def to_dict(self, filters: dict[str, str]) -> dict[str, Any]:
        """`history --json`: each round with its outcome and whether it is pooled."""
        return {"rounds": [{**r.to_dict(), "outcome": round_outcome(r), "pooled": is_pooled(r)}
                           for r in self.rounds],
                "versions": [v.version_dict() for v in self.versions],
                "group_by": list(self.group_by),
                "groups": [g.to_dict() for g in self.groups],
                "change_points": self.change_points.to_dict(), "filters": dict(filters)}


def trend(rows: list[RoundRow], group_by: list[str]) -> Trend:
    versions = per_version(rows)
    changes = ChangePoints(
        method=METHOD, series_by=list(group_by),
        rounds=round_change_points(
            [r for r in rows if is_pooled(r)],
            lambda r: ", ".join(f"{k} {key_value(r, k)}" for k in group_by)),
        versions=version_change_points([v for v in versions if v.measured]))
    return Trend(rounds=rows, versions=versions, group_by=list(group_by),
                 groups=per_group(rows, group_by), change_points=changes)


@dataclass(frozen=True)
class Shown:
    """What `history` did beside printing: how many rounds, and where the plot went."""

    rounds: int
    plot: Path | None  # written here; None: not asked for, no rounds, or not writable
    plot_problem: str | None = None  # why a plot that was asked for is not there


def plot_target(db: str | Path, plot: Path | None, *, no_plot: bool,
                as_json: bool) -> Path | None:
    """Where the trend plot goes: nowhere with --no-plot, nor with --json unless --plot
    names a file (JSON is read by programs; a file beside the database would surprise
    them, and a read-only history must stay readable)."""
    if no_plot or (as_json and plot is None):
        return None
    return plot or default_plot(db)


def show_history(db: str | Path, *, soak_id: str | None, scenario: str | None,
                 last: int | None, plot: Path | None, as_json: bool, no_plot: bool = False,
                 filters: dict[str, str] | None = None,
                 group_by: list[str] | None = None) -> Shown:
    """Print the rounds (or their JSON) and write the trend plot where one is asked for.

    A plot that cannot be written (a read-only folder beside the database) never loses
    what was printed: it becomes `plot_problem`, for the command to say and decide on.
    """
    store = History(db, create=False)
    try:
        everything = store.all_rounds()
    finally:
        store.close()
    asked = {"soak": soak_id, "scenario": scenario, **(filters or {})}
    problem = unknown_filter(everything, asked, {"scenario": shipped_scenarios()})
    if problem is not None:
        said, typo = problem
        if typo:
            raise BadInputError(said)
        print(f"dsv4-qual: {said}", file=sys.stderr)
    rows = filter_rounds(everything, {k: v for k, v in asked.items() if v is not None}, last)
    keys = list(group_by or DEFAULT_GROUP_BY)
    found = trend(rows, keys)
    if as_json:
        print(orjson.dumps(found.to_dict(filters or {}), option=orjson.OPT_INDENT_2).decode())
    else:
        out = console()
        out.print(round_table(rows, out.width))
        out.print(version_table(found.versions))
        if keys != list(DEFAULT_GROUP_BY):
            out.print(group_table(found.groups, keys))
        out.print(change_table(found.change_points))
    target = plot_target(db, plot, no_plot=no_plot, as_json=as_json)
    if not rows or target is None:
        return Shown(len(rows), None)
    try:
        write_trend_plot(rows, target, found.change_points.rounds, keys)
    except OSError as exc:
        return Shown(len(rows), None, f"trend plot {target}: cannot write it "
                                      f"({exc.strerror or exc})")
    return Shown(len(rows), target)
