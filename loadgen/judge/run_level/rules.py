"""Which run-level rules a run is judged by."""

from __future__ import annotations

from loadgen.judge.run_level import Rule
from loadgen.judge.run_level.cross_talk import CrossTalk
from loadgen.judge.run_level.divergent import Divergent
from loadgen.judge.run_level.reference import ReferenceAgreement
from loadgen.scenario import Scenario


def rules_for(scenario: Scenario) -> list[Rule]:
    """Every run-level rule the scenario calls for, fresh for one pass over its records."""
    rules: list[Rule] = [Divergent(), CrossTalk()]
    if scenario.reference.requests > 0:
        rules.append(ReferenceAgreement(scenario.reference))
    return rules
