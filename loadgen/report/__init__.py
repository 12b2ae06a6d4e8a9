"""Rendering only: a judged run (or qualification) -> the files people and CI read.

One module per output: summary.json (`summary`), report.md (`markdown`), junit.xml
(`junit`), report.html (`html`, with `figures` and `telemetry_plots`), the soak
trend (`trend`) and the qualification's side-by-side pages (`qualify_*`). A run's files
are written where every run ends (`outcome`), a qualification's by `qualify_files`.
"""

from __future__ import annotations

from loadgen.report.outcome import write_run_reports
from loadgen.report.qualify_files import write_qualify_reports
from loadgen.results import QUALIFY_FILE

__all__ = ["QUALIFY_FILE", "write_qualify_reports", "write_run_reports"]
