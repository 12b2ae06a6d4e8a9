"""Workloads: deterministic request bodies, one module per kind."""

from __future__ import annotations

from loadgen.scenario import LongContextWorkload, ReplayWorkload, Scenario, ToolTurnWorkload
from loadgen.workload.base import WorkItem, Workload
from loadgen.workload.long_context import LongContext
from loadgen.workload.replay import Replay
from loadgen.workload.tool_turn import ToolTurn


def make_workload(scenario: Scenario, chars_per_token: float | None = None) -> Workload:
    """The workload a scenario names, seeded by the scenario."""
    cfg = scenario.workload
    if isinstance(cfg, ToolTurnWorkload):
        return ToolTurn(cfg)
    if isinstance(cfg, LongContextWorkload):
        return LongContext(cfg, chars_per_token=chars_per_token)
    if isinstance(cfg, ReplayWorkload):
        return Replay(cfg)
    raise TypeError(f"unknown workload {cfg!r}")  # pragma: no cover - schema forbids it


__all__ = ["WorkItem", "Workload", "make_workload"]
