"""The known-answer and session workloads: every request carries an answer the judge can
check, and the answer follows from what the request says (checked on every item of a
cycle, for several seeds, not on examples)."""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import json
import re

import pytest

from loadgen.expectations import Expectation
from loadgen.judge.reply.known_answers import answer_problems, argument_problems
from loadgen.judge.text.typed_values import states_text
from loadgen.scenario import Scenario
from loadgen.workload import make_workload, shares_prefixes, sized_in_tokens
from loadgen.workload.base import WorkItem
from loadgen.workload.mix import first_cycle, units
from loadgen.workload.session import TOOL_LOOP, USER_TURN


def cycle(workload: dict, **scenario: object) -> list[WorkItem]:
    sc = Scenario.model_validate({"workload": workload, **scenario})
    return first_cycle(make_workload(sc).items())


def text_of(item: WorkItem) -> str:
    return "\n".join(str(m.get("content") or "") for m in item.messages)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_every_known_answer_is_stated_by_its_own_request(seed: int) -> None:
    items = cycle({"kind": "known-answer", "seed": seed, "needle_tokens": [256, 600]})
    assert {i.tags["probe"] for i in items} == {"echo", "needle", "lookup", "computed"}
    for item in items:
        exp = item.expected
        assert exp is not None and exp.checkable
        text = text_of(item)
        for check in exp.checks:
            value = exp.facts[check.fact]
            if item.tags["probe"] in ("echo", "needle", "lookup"):
                assert states_text(text, value), (item.item_id, value)
        for name in exp.distinctive:
            assert exp.facts[name] in text, (item.item_id, name)


def test_computed_answers_follow_from_the_request() -> None:
    for item in cycle({"kind": "known-answer", "probes": ["computed"]}):
        exp = item.expected
        assert exp is not None
        text = text_of(item)
        if item.item_id.endswith("/sum"):
            amounts = [int(n) for n in re.findall(r"\d+", text.split(":")[-1])]
            assert exp.facts["total"] == str(sum(amounts))
            assert answer_problems(exp, f"The total is {sum(amounts):,}.") == []
        elif item.item_id.endswith("/date"):
            days, base = re.search(r"date (\d+) days after (.+)\?", text).groups()
            want = dt.datetime.strptime(base, "%d %B %Y").date() + dt.timedelta(int(days))
            assert exp.facts["date"] == want.isoformat()
        else:
            assert exp.call is not None and exp.call.exact is not None
            args = exp.call.exact
            assert args["order_id"] in text and args["address"]["city"] in text
            for line in args["items"]:
                assert f"{line['quantity']} units of {line['sku']}" in text
            assert ("express" in text.split("Use ")[-1]) == args["express"] or \
                "not express" in text
            assert argument_problems(args, json.loads(json.dumps(args))) == []


def test_every_value_that_names_a_request_is_its_own_in_the_run() -> None:
    items = cycle({"kind": "known-answer"})
    owners = collections.defaultdict(set)
    for item in items:
        for name in item.expected.distinctive:
            owners[item.expected.facts[name]].add(item.item_id)
    assert all(len(ids) == 1 for ids in owners.values())


def test_the_needle_sweep_covers_every_length_depth_residue_and_reasoning_mode() -> None:
    items = [i for i in cycle({"kind": "known-answer", "needle_tokens": [300, 900],
                               "needle_depths": [0.0, 0.5, 1.0]})
             if i.tags["probe"] == "needle"]
    seen = {(i.approx_prompt_tokens, i.item_id.rsplit("/d", 1)[1], i.reasoning) for i in items}
    assert seen == {(length + extra, depth, reasoning) for length in (300, 900)
                    for extra in range(4) for depth in ("0", "0.5", "1")
                    for reasoning in (True, False)}
    # Four variants one filler word apart: every residue of the length mod 4.
    assert {i.approx_prompt_tokens % 4 for i in items} == {0, 1, 2, 3}


def test_requests_side_by_side_ask_for_different_catalog_rows() -> None:
    items = [i for i in cycle({"kind": "known-answer", "probes": ["lookup"]})]
    asked = [i.expected.facts["item"] for i in items]
    assert all(a != b for a, b in itertools.pairwise(asked))
    for item in items:
        rows = re.findall(r"^\| ([a-z ]+) \| (\S+) \|", text_of(item), re.M)
        assert dict(rows)[item.expected.facts["item"]] == item.expected.facts["code"]


def test_reasoning_modes_are_sent_through_the_template_switch() -> None:
    from loadgen.engine.requests import RequestMaker

    sc = Scenario.model_validate({"workload": {"kind": "known-answer", "reasoning": ["off"]},
                                  "request": {"chat_template_kwargs": {"thinking": True,
                                                                       "reasoning_effort": "high"},
                                              "reasoning_switch": "enable_thinking"}})
    item = first_cycle(make_workload(sc).items())[0]
    prepared = RequestMaker(sc, "r", "m").body(item)
    body = json.loads(prepared.raw)
    assert body["chat_template_kwargs"] == {"thinking": True, "reasoning_effort": "high",
                                            "enable_thinking": False}
    assert prepared.offered["reasoning"] == "off"
    assert prepared.offered["tags"] == {"probe": "echo"}


@pytest.mark.parametrize("seed", [0, 3])
def test_a_session_grows_by_appending_and_each_turn_checks_its_own_answer(seed: int) -> None:
    items = cycle({"kind": "session", "seed": seed, "sessions": 6,
                   "shared_prefix_tokens": [200, 700], "think_time_s": [0.5, 1.5]})
    sessions = units(items)
    assert len(sessions) == 6 and all(len(s) == 8 for s in sessions)
    facts_of = {}
    for turns in sessions:
        first = turns[0]
        facts_of[first.turn.session] = first.expected.facts
        assert {t.turn.session for t in turns} == {first.turn.session}
        assert [t.turn.index for t in turns] == list(range(8))
        assert first.turn.think_s == 0 and all(0.5 <= t.turn.think_s <= 1.5 for t in turns[1:])
        answered: list[str] = []
        for before, after in itertools.pairwise(turns):
            # The next prompt is this one, its correct reply and what comes next.
            assert after.messages[:len(before.messages)] == before.messages
            reply = after.messages[len(before.messages)]
            assert reply["role"] == "assistant" and reply["reasoning_content"]
            nxt = after.messages[len(before.messages) + 1]
            assert nxt["role"] == ("tool" if after.tags["turn"] == TOOL_LOOP else "user")
        for turn in turns:
            exp = turn.expected
            assert list(exp.stale) == answered
            if exp.checks:
                (check,) = exp.checks
                answered.append(check.fact)
                value = exp.facts[check.fact]
                # What the turn answers was said earlier in the session's own history.
                history = "\n".join(str(m.get("content")) for m in turn.messages[1:])
                assert value in history or check.kind == "date"
            assert turn.tags["turn"] in (TOOL_LOOP, USER_TURN)
        assert {t.tags["prefix_tokens"] for t in turns} in ({"200"}, {"700"})
    # No two sessions share a fact that names them.
    values = [v for facts in facts_of.values() for n, v in facts.items() if n != "delivery_date"]
    assert len(values) == len(set(values))


def test_sessions_share_the_system_prefix_of_their_size() -> None:
    items = cycle({"kind": "session", "sessions": 4, "shared_prefix_tokens": [200, 700]})
    systems = collections.defaultdict(set)
    for item in items:
        systems[item.tags["prefix_tokens"]].add(item.messages[0]["content"])
    assert {k: len(v) for k, v in systems.items()} == {"200": 1, "700": 1}
    short, long = (next(iter(systems[k])) for k in ("200", "700"))
    assert len(long) > 2.5 * len(short)


def test_a_mix_keeps_its_shares_and_never_splits_a_session() -> None:
    items = cycle({"kind": "mix", "weights": [2, 1, 1], "parts": [
        {"kind": "tool-turn", "variant": "per-request", "accounts": 8},
        {"kind": "known-answer", "probes": ["echo", "lookup"]},
        {"kind": "session", "sessions": 3}]})
    ids = [i.item_id for i in items]
    assert len(ids) == len(set(ids))
    kinds = collections.Counter(i.item_id.split("/")[1] for i in items)
    total = sum(kinds.values())
    assert abs(kinds["tool-turn"] / total - 0.5) < 0.05
    for unit in units(items):
        if unit[0].turn is not None:
            assert [t.turn.index for t in unit] == list(range(8))


def test_what_the_run_calibrates_and_whether_prefixes_are_shared() -> None:
    def cfg(workload: dict):
        return Scenario.model_validate({"workload": workload}).workload

    assert sized_in_tokens(cfg({"kind": "known-answer"}))
    assert not sized_in_tokens(cfg({"kind": "tool-turn"}))
    assert sized_in_tokens(cfg({"kind": "mix", "parts": [{"kind": "tool-turn"},
                                                         {"kind": "session"}]}))
    assert shares_prefixes(cfg({"kind": "session"}))
    assert shares_prefixes(cfg({"kind": "known-answer"}))
    assert not shares_prefixes(cfg({"kind": "known-answer", "probes": ["echo"]}))
    assert not shares_prefixes(cfg({"kind": "long-context"}))


def test_an_expectation_of_every_item_survives_the_record() -> None:
    for item in cycle({"kind": "mix", "parts": [{"kind": "known-answer"},
                                                {"kind": "session", "sessions": 2}]}):
        assert Expectation.from_dict(item.expected.to_dict()) == item.expected
