"""Workloads: deterministic request bodies, one module per kind."""

from __future__ import annotations

from loadgen.scenario import (
    KnownAnswerWorkload,
    LongContextWorkload,
    MixWorkload,
    ReplayWorkload,
    Scenario,
    SessionWorkload,
    ToolTurnWorkload,
)
from loadgen.scenario import Workload as WorkloadConfig
from loadgen.workload.base import Turn, WorkItem, Workload
from loadgen.workload.known_answer import KnownAnswer
from loadgen.workload.long_context import LongContext
from loadgen.workload.mix import Mix
from loadgen.workload.replay import Replay
from loadgen.workload.session import Sessions
from loadgen.workload.tool_turn import ToolTurn

#: Workload kinds whose prompt lengths are set in tokens: the run calibrates characters
#: per token on the server's tokenizer before it builds them.
SIZED_IN_TOKENS = frozenset({"long-context", "known-answer", "session"})


def make_workload(scenario: Scenario, chars_per_token: float | None = None) -> Workload:
    """The workload a scenario names, seeded by the scenario."""
    return workload_for(scenario.workload, chars_per_token)


def workload_for(cfg: WorkloadConfig, chars_per_token: float | None = None) -> Workload:
    if isinstance(cfg, ToolTurnWorkload):
        return ToolTurn(cfg)
    if isinstance(cfg, LongContextWorkload):
        return LongContext(cfg, chars_per_token=chars_per_token)
    if isinstance(cfg, ReplayWorkload):
        return Replay(cfg)
    if isinstance(cfg, KnownAnswerWorkload):
        return KnownAnswer(cfg, chars_per_token=chars_per_token)
    if isinstance(cfg, SessionWorkload):
        return Sessions(cfg, chars_per_token=chars_per_token)
    if isinstance(cfg, MixWorkload):
        return Mix([workload_for(part, chars_per_token) for part in cfg.parts], cfg.weights)
    raise TypeError(f"unknown workload {cfg!r}")  # pragma: no cover - schema forbids it


def sized_in_tokens(cfg: WorkloadConfig) -> bool:
    """Whether the workload (or a part of a mix) sets prompt lengths in tokens."""
    if isinstance(cfg, MixWorkload):
        return any(sized_in_tokens(part) for part in cfg.parts)
    return cfg.kind in SIZED_IN_TOKENS


def shares_prefixes(cfg: WorkloadConfig) -> bool:
    """Whether requests of the workload share long prefixes a server's prefix cache can
    serve: sessions (a shared system prefix, growing histories), needles (one filler
    per length), or a mix with either."""
    if isinstance(cfg, MixWorkload):
        return any(shares_prefixes(part) for part in cfg.parts)
    if isinstance(cfg, KnownAnswerWorkload):
        return "needle" in cfg.probes
    return isinstance(cfg, SessionWorkload)


__all__ = ["Turn", "WorkItem", "Workload", "make_workload", "shares_prefixes",
           "sized_in_tokens", "workload_for"]
