"""What a `wrong_answer` finding says, word for word, and which replies it holds to which
facts (judge.reply.substance).

A person reads a wrong answer in the report as one line per wrong field ("wrong answer:
<where> states <what>, the request's <fact> is <value>"); each piece of that line is a
field of the finding, so each is pinned here through the line the report prints.
"""

from __future__ import annotations

import orjson

from loadgen.expectations import Expectation, ExpectedCall
from loadgen.judge.findings import Findings, findings_lines
from loadgen.judge.reply.substance import WrongFinding, find_wrong
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from tests.loadgen.judge.reply.test_substance import ANSWER, OFFERED, answer, call, turn


def report_lines(record: RequestRecord) -> list[str]:
    """The verdicts and the report's lines about the wrong answer of one record."""
    classify(record, VerdictConfig())
    return [line for line in findings_lines(Findings.read(record.findings))
            if line.startswith("wrong answer")]


def test_an_answer_that_omits_a_fact_names_the_content_the_fact_and_its_value() -> None:
    r = answer("The contract NW481302 grew 4% this year.")
    assert find_wrong(r) == [WrongFinding(field="content", fact="account_id",
                                           expected="K7Q2ZD", got=None)]
    assert report_lines(r) == [
        "wrong answer: content states nothing, the request's account_id is 'K7Q2ZD'"]


def test_a_wrong_argument_names_the_call_the_fact_and_both_values() -> None:
    r = turn(call("change_plan", account_id="K7Q2ZD", plan="business"))
    assert find_wrong(r) == [WrongFinding(field="call 0 change_plan.plan", fact="plan",
                                          expected="enterprise", got="business")]
    assert report_lines(r) == [
        "wrong answer: call 0 change_plan.plan states 'business', the request's plan is "
        "'enterprise'"]


def test_a_call_without_a_name_is_named_by_a_question_mark() -> None:
    # The call that carries the wrong account has no function name (the server dropped
    # it): the finding still says which call, and "?" for the name it lacks.
    r = turn({"id": "c", "type": "function",
              "function": {"name": "", "arguments": '{"account_id": "B4D2XQ"}'}})
    assert find_wrong(r) == [WrongFinding(field="call 0 ?.account_id", fact="account_id",
                                          expected="K7Q2ZD", got="B4D2XQ")]


def test_a_call_without_a_name_is_not_a_function_of_its_own() -> None:
    # Where the request offers no tools list to check names against, a nameless call is
    # still no function the reply chose instead of the asked one.
    r = turn({"id": "c", "type": "function",
              "function": {"name": "", "arguments": '{"account_id": "K7Q2ZD"}'}})
    r.params = {}
    assert find_wrong(r) == []


def test_acting_with_other_functions_names_each_of_them() -> None:
    offered = {**OFFERED, "suspend_account": ["account_id"]}
    r = turn(call("suspend_account", account_id="K7Q2ZD"),
             call("cancel_subscription", account_id="K7Q2ZD", effective="immediately"))
    r.params = {**r.params, "tools": offered}
    assert find_wrong(r) == [WrongFinding(field="calls", fact="function", expected="change_plan",
                                          got="cancel_subscription, suspend_account")]
    assert report_lines(r) == [
        "wrong answer: calls states 'cancel_subscription, suspend_account', the request's "
        "function is 'change_plan'"]


def test_a_missing_key_does_not_hide_a_wrong_one_after_it() -> None:
    # The account is left out (bad_tool_call's finding); the plan that follows it in the
    # expectation is still checked.
    r = turn(call("change_plan", plan="business"))
    assert [(w.field, w.got) for w in find_wrong(r)] == [("call 0 change_plan.plan",
                                                          "business")]


def test_arguments_encoded_twice_are_not_read_as_an_object() -> None:
    # A JSON string that holds the JSON object: the arguments are not an object
    # (bad_tool_call), and the text of the string is no argument value.
    doubled = orjson.dumps(orjson.dumps({"account_id": "B4D2XQ", "plan": "free"}).decode())
    r = turn({"id": "c", "type": "function",
              "function": {"name": "change_plan", "arguments": doubled.decode()}})
    assert find_wrong(r) == []
    assert classify(r, VerdictConfig()) == ["bad_tool_call"]


def test_a_prose_request_answered_with_a_tool_call_is_not_held_to_its_facts() -> None:
    # A document question that the reply answers with a tool call: no facts stated in
    # prose to check (the call is the tool rules' business), and no call was asked for.
    assert ANSWER.call is None
    r = answer("")
    r.tool_calls = [call("get_account", account_id="B4D2XQ")]
    r.finish_reason = "tool_calls"
    assert find_wrong(r) == []


def test_a_tool_turn_answered_in_prose_is_not_checked_as_a_call() -> None:
    # The tool turn's expectation asks no facts of prose: a reply without a call is
    # no_tool_call's, not a wrong answer.
    exp = Expectation(facts={"account_id": "K7Q2ZD"}, distinctive=("account_id",),
                      call=ExpectedCall("change_plan", {"account_id": "account_id"}))
    r = answer("Done: B4D2XQ moved.")
    r.expected = exp.to_dict()
    assert find_wrong(r) == []


def test_a_call_whose_function_is_not_an_object_is_bad_tool_call_alone() -> None:
    # Nothing to compare: the tool rules report the call; this rule neither counts it
    # nor stops at it.
    r = turn({"id": "c", "type": "function", "function": "change_plan"})
    assert find_wrong(r) == []
    assert classify(r, VerdictConfig()) == ["bad_tool_call"]
