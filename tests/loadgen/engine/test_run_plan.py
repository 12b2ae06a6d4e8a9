"""One run plan: the workload is built once, and the plan sends what the three separate
paths sent before it (the phases' stream, the pre-flight check's distinct items, the
reference phase's sample), seq for seq and byte for byte."""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import loadgen.workload
from loadgen.engine.plan import MEASUREMENT, PRIMING, REFERENCE, RunPlan, reference_sample
from loadgen.engine.requests import RequestMaker
from loadgen.engine.runner import Runner
from loadgen.records import iter_record_dicts
from loadgen.scenario import Scenario, load_scenario
from loadgen.workload import WorkItem, make_workload


def old_phase_items(scenario: Scenario, cpt: float | None) -> list[WorkItem]:
    """The runner's stream before the plan: one iterator over priming then measurement."""
    load = scenario.load
    return list(itertools.islice(make_workload(scenario, cpt).items(),
                                 load.priming + load.measurement))


def old_planned_items(scenario: Scenario, cpt: float | None) -> list[WorkItem]:
    """preflight.planned_items before the plan."""
    load = scenario.load
    seen: set[str] = set()
    found = []
    items = make_workload(scenario, cpt).items()
    for _ in range(load.priming + load.measurement):
        item = next(items)
        if item.item_id in seen:
            break
        seen.add(item.item_id)
        found.append(item)
    return found


def old_reference_items(scenario: Scenario, cpt: float | None) -> list[WorkItem]:
    """reference.reference_items before the plan: the sample drawn from the measured range
    of a workload built afresh (how it samples is test_reference_rule's)."""
    load = scenario.load
    items = itertools.islice(make_workload(scenario, cpt).items(),
                             load.priming, load.priming + load.measurement)
    return reference_sample(items, scenario.reference.requests)


def replay_path(tmp_path: Path) -> str:
    # 9 lines, 4 distinct bodies: the reference sample keeps one item per body.
    lines = [orjson.dumps({"messages": [{"role": "user", "content": f"q{i % 4}"}],
                           "temperature": 0.1 * (i % 4)}) for i in range(9)]
    path = tmp_path / "bodies.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


def scenario_of(workload: dict[str, Any], priming: int, measurement: int,
                reference: int, when: str = "after") -> Scenario:
    return Scenario.model_validate({
        "workload": workload, "load": {"priming": priming, "measurement": measurement},
        "request": {"max_tokens": 64}, "gate": {"prove_below": 0.9},
        "reference": {"requests": reference, "when": when}})


CASES: dict[str, tuple[dict[str, Any], int, int, int, str]] = {
    "as-reported": ({"kind": "tool-turn"}, 3, 10, 4, "after"),
    "per-request": ({"kind": "tool-turn", "variant": "per-request", "accounts": 7,
                     "seed": 2}, 5, 40, 3, "before"),
    # More accounts than the run sends: the plan keeps only what it sends.
    "shorter-than-a-cycle": ({"kind": "tool-turn", "variant": "per-request",
                              "accounts": 50}, 4, 20, 6, "after"),
    # Over two of its 64-document cycles.
    "long-context": ({"kind": "long-context", "context_tokens": [32, 64, 160],
                      "weights": [1, 2, 1]}, 10, 150, 5, "after"),
    "long-context-no-tools": ({"kind": "long-context", "context_tokens": [40, 90],
                               "tools": False, "seed": 5}, 0, 70, 70, "before"),
    "replay": ({"kind": "replay", "shuffle": True, "seed": 4}, 2, 30, 3, "after"),
    "replay-all-bodies": ({"kind": "replay"}, 7, 11, 10, "after"),
    "no-reference": ({"kind": "tool-turn", "accounts": 3}, 2, 9, 0, "after"),
}
SHIPPED = ["smoke", "issue-52448", "pr-51318", "sim-smoke"]


def cases(tmp_path: Path) -> list[tuple[str, Scenario]]:
    built = []
    for name, (workload, priming, measurement, reference, when) in CASES.items():
        if workload["kind"] == "replay":
            workload = {**workload, "path": replay_path(tmp_path)}
        built.append((name, scenario_of(workload, priming, measurement, reference, when)))
    return built + [(name, load_scenario(name)) for name in SHIPPED]


@pytest.mark.parametrize("cpt", [None, 3.3])
def test_the_plan_sends_what_the_three_paths_sent(tmp_path: Path, cpt: float | None) -> None:
    for name, scenario in cases(tmp_path):
        load = scenario.load
        plan = RunPlan.build(scenario, cpt, RequestMaker(scenario, "r", "m"))
        old = old_phase_items(scenario, cpt)
        assert [plan.item(seq) for seq in range(plan.planned)] == old, name
        # Each phase's source: its first seq, then its items in seq order.
        for phase, start, count in ((PRIMING, 0, load.priming),
                                    (MEASUREMENT, load.priming, load.measurement)):
            source = plan.source(phase)
            assert (source.next_seq, plan.count(phase)) == (start, count), name
            assert list(itertools.islice(source.items, count)) == old[start:start + count]
        # A worker process starting anywhere gets the same items as one process.
        for start in (0, 1, load.priming, plan.planned - 1):
            assert list(plan.items(start)) == old[start:], (name, start)
        assert list(plan.distinct()) == old_planned_items(scenario, cpt), name
        reference = old_reference_items(scenario, cpt)
        assert list(plan.reference) == reference, name
        source = plan.source(REFERENCE)
        assert source.next_seq == plan.planned and list(source.items) == reference
        assert plan.count(REFERENCE) == len(reference)
        # The same bodies, whoever asks for one first (the check or a phase).
        fresh = RequestMaker(scenario, "r", "m")
        assert [plan.maker.body(item).raw for item in old] == \
            [fresh.body(item).raw for item in old], name
        with pytest.raises(IndexError):
            plan.item(plan.planned)


def test_the_phase_order_is_the_runners() -> None:
    def order(requests: int, when: str) -> list[str]:
        scenario = scenario_of({"kind": "tool-turn"}, 1, 2, requests, when)
        return RunPlan.build(scenario, None, RequestMaker(scenario, "r", "m")).phases

    assert order(0, "before") == [PRIMING, MEASUREMENT]
    assert order(2, "before") == [REFERENCE, PRIMING, MEASUREMENT]
    assert order(2, "after") == [PRIMING, MEASUREMENT, REFERENCE]


def test_a_workload_that_does_not_cycle_from_its_first_item_is_refused() -> None:
    from loadgen.engine.plan import one_cycle

    def items() -> Any:
        yield WorkItem("a", [])
        while True:
            yield WorkItem("b", [])
            yield WorkItem("c", [])

    with pytest.raises(ValueError, match="does not cycle"):
        one_cycle(items(), 10)


@pytest.mark.parametrize("kind,when", [("tool-turn", "after"), ("long-context", "before")])
def test_a_run_builds_its_workload_once(fake_server, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, kind: str,
                                        when: str) -> None:
    fake, srv = fake_server(("ok",))  # it states max_model_len: the check runs
    workload: dict[str, Any] = ({"kind": kind, "variant": "per-request", "accounts": 6}
                                if kind == "tool-turn" else
                                {"kind": kind, "context_tokens": [24, 48, 96]})
    scenario = Scenario.model_validate({
        "target": {"base_urls": [srv.url]}, "workload": workload,
        "load": {"concurrency": 3, "priming": 4, "measurement": 12},
        "request": {"max_tokens": 32}, "gate": {"prove_below": 0.9},
        "reference": {"requests": 3, "when": when}})
    calls = []
    original = loadgen.workload.make_workload

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    # Wherever a module of the load generator took its own name for it.
    for module in list(sys.modules.values()):
        if (getattr(module, "__name__", "").startswith("loadgen")
                and getattr(module, "make_workload", None) is original):
            monkeypatch.setattr(module, "make_workload", counting)
    out = tmp_path / "out"
    out.mkdir()
    facts = asyncio.run(Runner(scenario, out, "r", quiet=True).run())
    assert facts.invalid is None and facts.interrupted is None
    assert facts.phases_done == ([REFERENCE, PRIMING, MEASUREMENT] if when == "before"
                                 else [PRIMING, MEASUREMENT, REFERENCE])
    assert len(calls) == 1
    assert sum(fake.counts.values()) == 4 + 12 + 3
    if kind == "long-context":
        assert facts.chars_per_token is not None  # calibrated on the server, then planned
    # What went out is what the old paths would have sent, seq for seq.
    cpt = facts.chars_per_token
    old = old_phase_items(scenario, cpt)
    reference = old_reference_items(scenario, cpt)
    maker = RequestMaker(scenario, "r", facts.model)
    expected = {seq: (item.item_id, maker.body(item).body_hash)
                for seq, item in enumerate([*old, *reference])}
    records = list(iter_record_dicts(out / "records.jsonl"))
    assert {r["seq"]: (r["item_id"], r["body_hash"]) for r in records} == expected
    assert facts.reference_items == [item.item_id for item in reference]
