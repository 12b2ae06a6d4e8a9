"""Reports of one results directory: summary.json, report.md, junit.xml, report.html.

Every report is rebuilt from records.jsonl (plus the run's scenario.json and
server.json), so `dsv4-qual report DIR` can redo them after a crash or a change of
report code, and nothing a run produced is ever lost.
"""

from loadgen.report.build import write_reports

__all__ = ["write_reports"]
