"""What a tool turn's findings say, as records.jsonl carries them.

A `tool_args_loop` verdict is only as useful as the line that says which call and which
value loops: a person reads it to tell a server's #52448 loop from a model's verbose
email. These pin the path the issue names that no test ran: arguments that parse as
valid JSON, a reply that finished with `tool_calls`, and a string value in them (at any
depth: an array of notes, an object in an array) that restates one sentence.
"""

from __future__ import annotations

import json

from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

CFG = VerdictConfig()
OFFERED = {"change_plan": ["account_id", "plan"],
           "send_email": ["account_id", "subject", "body"]}
SENTENCE = "We will upgrade your account to business. "
BODY = "Thank you for your order. " + SENTENCE * 6  # loop_ended_min_repeats: 6


def tool_turn(arguments: dict, name: str = "change_plan") -> RequestRecord:
    return RequestRecord(
        run_id="r", scenario="s", phase="measurement", seq=0, endpoint="http://x",
        item_id="i", status=200, finish_reason="tool_calls", reasoning="Do it.",
        params={"tools": OFFERED, "tool_choice": None, "expects_tool_call": True},
        tool_calls=[{"id": "t", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(arguments)}}])


def test_a_value_that_loops_in_valid_json_names_the_call_the_unit_and_the_count() -> None:
    # Finished cleanly (tool_calls), arguments parse: the loop is in what the email says.
    r = tool_turn({"account_id": "XEHM4B", "subject": "Upgrade", "body": BODY}, "send_email")
    assert classify(r, CFG) == ["tool_args_loop"]
    assert r.findings == {"tool_calls": [
        f"call 0 (send_email): an argument value loops: {SENTENCE!r} x6"]}


def test_a_value_that_loops_inside_an_array_is_found() -> None:
    # A model that writes its notes as a list: the looping string is an item of it.
    r = tool_turn({"account_id": "XEHM4B", "plan": "business", "notes": ["ok", BODY]})
    assert classify(r, CFG) == ["tool_args_loop"]
    assert r.findings["tool_calls"] == [
        f"call 0 (change_plan): an argument value loops: {SENTENCE!r} x6"]


def test_a_value_that_loops_inside_an_object_in_an_array_is_found() -> None:
    r = tool_turn({"account_id": "XEHM4B", "plan": "business",
                   "lines": [{"sku": "SEAT", "note": BODY}]})
    assert classify(r, CFG) == ["tool_args_loop"]
    assert r.findings["tool_calls"] == [
        f"call 0 (change_plan): an argument value loops: {SENTENCE!r} x6"]


def test_one_repeat_below_the_threshold_the_arguments_are_fine() -> None:
    body = "Thank you for your order. " + SENTENCE * 5
    r = tool_turn({"account_id": "XEHM4B", "subject": "Upgrade", "body": body}, "send_email")
    assert classify(r, CFG) == ["ok"]
    assert r.findings == {}


def test_the_second_call_is_named_by_its_index() -> None:
    r = tool_turn({"account_id": "XEHM4B", "plan": "business"})
    r.tool_calls.append({"id": "u", "type": "function", "function": {
        "name": "send_email",
        "arguments": json.dumps({"account_id": "XEHM4B", "subject": "Hi", "body": BODY})}})
    assert classify(r, CFG) == ["tool_args_loop"]
    assert r.findings["tool_calls"] == [
        f"call 1 (send_email): an argument value loops: {SENTENCE!r} x6"]
