"""The context check before sending counts a floor: it never refuses a run that fits."""

from __future__ import annotations

import pytest

from loadgen.engine.plan import RunPlan
from loadgen.engine.preflight import item_texts, words
from loadgen.engine.requests import RequestMaker
from loadgen.scenario import Scenario, load_scenario
from server_patch.sim.model import count_tokens, render_prompt
from tests.loadgen.conftest import REPO

SHIPPED = sorted(p.stem for p in (REPO / "scenarios").glob("*.toml"))


def planned_items(scenario: Scenario) -> tuple:
    """What the check looks at: each distinct item priming and measurement send."""
    return RunPlan.build(scenario, None, RequestMaker(scenario, "r", "m")).distinct()


@pytest.mark.parametrize("name", SHIPPED)
def test_the_word_floor_is_below_what_a_tokenizer_counts(name: str) -> None:
    scenario = load_scenario(name)
    for item in planned_items(scenario):
        floor = words(item_texts(item))
        assert 0 < floor <= count_tokens(render_prompt(item.messages, item.tools))


def test_planned_items_stop_at_the_workloads_cycle() -> None:
    # 1024 measured requests of one identical turn: one body to look at, not 1024.
    assert len(list(planned_items(load_scenario("issue-52448")))) == 1
    assert len(list(planned_items(load_scenario("smoke")))) == 32
