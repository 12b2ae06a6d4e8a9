"""`dsv4-qual history DB`: the soak history's trend, as tables and a plot."""

from __future__ import annotations

from pathlib import Path

import orjson

from loadgen.history import History
from loadgen.report.trend import console, per_version, round_table, version_table, write_trend_plot


def show_history(db: Path, *, soak_id: str | None, scenario: str | None, last: int | None,
                 plot: Path | None, as_json: bool) -> Path | None:
    """Print the rounds (or their JSON) and write the trend plot; the plot's path, if any."""
    store = History(db, create=False)
    try:
        rows = store.all_rounds(soak_id=soak_id, scenario=scenario, last=last)
    finally:
        store.close()
    versions = per_version(rows)
    if as_json:
        print(orjson.dumps({"rounds": rows, "versions": versions},
                           option=orjson.OPT_INDENT_2).decode())
    else:
        out = console()
        out.print(round_table(rows, out.width))
        out.print(version_table(versions))
    if not rows:
        return None
    target = plot or db.with_name(db.stem + "-trend.png")
    write_trend_plot(rows, target)
    return target
