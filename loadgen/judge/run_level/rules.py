"""Which run-level rules a run is judged by."""

from __future__ import annotations

from loadgen.judge.run_level import Rule
from loadgen.judge.run_level.cross_talk import CrossTalk
from loadgen.judge.run_level.divergent import Divergent
from loadgen.scenario import Scenario


def rules_for(scenario: Scenario) -> list[Rule]:
    """Every run-level rule, fresh for one pass over a run's records."""
    return [Divergent(), CrossTalk()]
