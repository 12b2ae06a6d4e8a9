"""`wrong_answer`: a reply judged against its own request's facts (judge.reply.substance)."""

from __future__ import annotations

import orjson
import pytest

from loadgen.expectations import Expectation, ExpectedCall
from loadgen.judge.reply.substance import find_wrong
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

OFFERED = {"get_account": ["account_id"], "change_plan": ["account_id", "plan"],
           "cancel_subscription": ["account_id", "effective"]}
TOOL_TURN = Expectation(facts={"account_id": "K7Q2ZD", "plan": "enterprise"},
                        distinctive=("account_id",),
                        call=ExpectedCall("change_plan", {"account_id": "account_id",
                                                          "plan": "plan"}, ("get_account",)))
ANSWER = Expectation(facts={"account_id": "K7Q2ZD", "contract": "NW481302"},
                     distinctive=("account_id", "contract"), answer=("account_id", "contract"))


def call(name: str, **args: object) -> dict:
    return {"id": "c", "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(args).decode()}}


def turn(*calls: dict, finish: str = "tool_calls", content: str = "") -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", finish_reason=finish,
                         reasoning="Change the plan.", content=content, tool_calls=list(calls),
                         params={"tools": OFFERED, "expects_tool_call": True},
                         expected=TOOL_TURN.to_dict())


def answer(content: str, finish: str = "stop") -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", finish_reason=finish,
                         reasoning="State the facts.", content=content,
                         expected=ANSWER.to_dict())


def test_the_right_call_is_ok_whatever_the_case_of_an_enum() -> None:
    r = turn(call("change_plan", account_id="K7Q2ZD", plan="Enterprise"))
    assert find_wrong(r) == []
    assert classify(r, VerdictConfig()) == ["ok"]


def test_a_lookup_first_on_the_right_account_is_ok() -> None:
    assert find_wrong(turn(call("get_account", account_id="K7Q2ZD"))) == []
    assert find_wrong(turn(call("get_account", account_id="K7Q2ZD"),
                           call("change_plan", account_id="K7Q2ZD", plan="enterprise"))) == []


def test_a_call_nobody_asked_for_beside_the_right_one_is_a_wrong_answer() -> None:
    # The turn asks for the plan change now (the system prompt: the first change only);
    # a cancellation beside it acts on the customer's account unasked.
    (wrong,) = find_wrong(turn(call("change_plan", account_id="K7Q2ZD", plan="enterprise"),
                               call("cancel_subscription", account_id="K7Q2ZD",
                                    effective="end_of_term")))
    assert (wrong.field, wrong.expected, wrong.got) == ("calls", "change_plan",
                                                        "cancel_subscription")
    (twice,) = find_wrong(turn(call("change_plan", account_id="K7Q2ZD", plan="enterprise"),
                               call("change_plan", account_id="K7Q2ZD", plan="enterprise")))
    assert (twice.expected, twice.got) == ("change_plan once", "change_plan x2")


@pytest.mark.parametrize("args,field,got", [
    ({"account_id": "B4D2XQ", "plan": "enterprise"}, "call 0 change_plan.account_id", "B4D2XQ"),
    ({"account_id": "K7Q2ZD", "plan": "business"}, "call 0 change_plan.plan", "business"),
    ({"account_id": "K7Q2Z", "plan": "enterprise"}, "call 0 change_plan.account_id", "K7Q2Z"),
    ({"account_id": 17, "plan": "enterprise"}, "call 0 change_plan.account_id", "17"),
])
def test_a_wrong_verifiable_field_is_a_wrong_answer(args: dict, field: str, got: str) -> None:
    r = turn(call("change_plan", **args))
    (wrong,) = find_wrong(r)
    assert (wrong.field, wrong.got) == (field, got)
    assert classify(r, VerdictConfig()) == ["wrong_answer"]
    assert r.findings["wrong_answer"][0]["expected"] in ("K7Q2ZD", "enterprise")


def test_the_account_is_checked_in_every_call_that_passes_it() -> None:
    r = turn(call("change_plan", account_id="K7Q2ZD", plan="enterprise"),
             call("cancel_subscription", account_id="Z9Z9Z9", effective="immediately"))
    assert [w.field for w in find_wrong(r)] == ["call 1 cancel_subscription.account_id",
                                                "calls"]


def test_acting_with_another_offered_function_is_a_wrong_answer() -> None:
    r = turn(call("cancel_subscription", account_id="K7Q2ZD", effective="immediately"))
    (wrong,) = find_wrong(r)
    assert (wrong.field, wrong.expected, wrong.got) == ("calls", "change_plan",
                                                        "cancel_subscription")


def test_what_another_rule_owns_is_not_counted_twice() -> None:
    # An unknown function is bad_tool_call; unparsable arguments or a missing key too.
    assert find_wrong(turn(call("delete_account", account_id="K7Q2ZD"))) == []
    bad = turn({"id": "c", "type": "function",
                "function": {"name": "change_plan", "arguments": "account_id=K7Q2ZD"}})
    assert find_wrong(bad) == []
    assert find_wrong(turn(call("change_plan", account_id="K7Q2ZD"))) == []
    # No call at all: no_tool_call's.
    assert find_wrong(turn(finish="stop", content="I moved it.")) == []


def test_an_answer_must_state_each_fact_as_a_whole_token() -> None:
    assert find_wrong(answer("Account k7q2zd (contract NW481302) grew 4%.")) == []
    missing = find_wrong(answer("The account grew 4% this year; contract NW481302."))
    assert [(w.fact, w.got) for w in missing] == [("account_id", None)]
    # A longer code that contains the fact does not state it.
    assert [w.fact for w in find_wrong(answer("K7Q2ZDX, NW4813021"))] == ["account_id",
                                                                         "contract"]


def test_a_cut_answer_is_not_held_to_facts_it_had_not_reached() -> None:
    assert find_wrong(answer("The account", finish="length")) == []


def test_without_an_expectation_nothing_is_checked() -> None:
    r = turn(call("change_plan", account_id="B4D2XQ", plan="free"))
    r.expected = None
    assert find_wrong(r) == []
    r.expected = {"facts": "garbage"}
    assert find_wrong(r) == []
