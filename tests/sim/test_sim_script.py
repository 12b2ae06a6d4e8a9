"""The toy model's healthy reply follows the request's own facts (the workloads' contract):
the account is the first code of the user's messages, the plan comes from the ask (the
last paragraph), and an answer states the request's codes."""

from __future__ import annotations

import json

import pytest

from server_patch.sim.facts import carried_by, find_codes, replace_codes
from server_patch.sim.model import Reply, Script, ask_of, make_script
from tests.sim.drive import TOOLS, billing_messages

ACCOUNT, CONTRACT = "Q7RT2M", "NW481302"
SUMMARY_ASK = ("State the account id and the contract number of the account above, then "
               "summarize its usage in three sentences.")


def healthy(script: Script, max_tokens: int = 400) -> Reply:
    reply = Reply(script, max_tokens)
    while not reply.done:
        reply.next_piece()
    return reply


def arguments(script: Script) -> dict:
    return json.loads("".join(script.tool_arguments))


@pytest.mark.parametrize("text,codes", [
    ("account XEHM4B, contract NW481302; XEHM4B again", ["XEHM4B", "NW481302"]),
    ("(AB12CD) and 'ZX81KQ'.", ["AB12CD", "ZX81KQ"]),
    ("XEHM4Bx aXEHM4B ABCDEF 123456 ABCDEFGHIJK12 ab12cd", []),  # not whole, or not codes
])
def test_codes_are_whole_tokens_of_letters_and_digits(text: str, codes: list[str]) -> None:
    assert find_codes(text) == codes


def test_replace_codes_swaps_whole_codes_only() -> None:
    swap = {"XEHM4B": "Q7RT2M"}
    assert replace_codes('{"account_id": "XEHM4B"} XEHM4Bx', swap) == \
        '{"account_id": "Q7RT2M"} XEHM4Bx'


def test_a_request_carries_the_codes_of_its_users_messages_only() -> None:
    messages = [{"role": "system", "content": "Ids look like XEHM4B."},
                {"role": "user", "content": [{"type": "text", "text": f"Hi, {ACCOUNT} here."}]},
                {"role": "assistant", "content": "Noted ZZ99ZZ."},
                {"role": "user", "content": f"And contract {CONTRACT}, please."}]
    carried = carried_by(messages)
    assert carried.facts == (ACCOUNT, CONTRACT)
    assert "contract" in carried.words and "noted" not in carried.words


def test_long_context_with_tools_moves_its_own_account_to_the_asked_plan() -> None:
    ask = "Move the account whose billing history is above to the pro plan now."
    messages = billing_messages(ACCOUNT, CONTRACT, ask)
    # The document names another plan; only the ask decides.
    messages[1]["content"] = messages[1]["content"].replace(
        "with invoices", "with an enterprise quote, invoices")
    script = make_script(messages, TOOLS)  # its tool descriptions mention XEHM4B
    assert ask_of(messages) == ask
    assert script.tool_name == "change_plan"
    assert arguments(script) == {"account_id": ACCOUNT, "plan": "pro"}
    assert healthy(script).finish_reason == "tool_calls"


def test_long_context_without_tools_states_both_codes() -> None:
    script = make_script(billing_messages(ACCOUNT, CONTRACT, SUMMARY_ASK), None)
    answer = "".join(script.answer)
    assert find_codes(answer) == [ACCOUNT, CONTRACT]
    assert f"account id is {ACCOUNT}" in answer and f"contract number is {CONTRACT}" in answer
    assert healthy(script).finish_reason == "stop"


def tool_turn(account: str, last: str) -> list[dict]:
    record = {"account_id": account, "plan": "pro", "status": "active"}
    lookup = {"name": "get_account", "arguments": json.dumps({"account_id": account})}
    return [
        {"role": "system", "content": "You are the billing assistant."},
        {"role": "user", "content": f"Hi, I need help with my account {account}."},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "type": "function", "function": lookup}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(record)},
        {"role": "assistant", "content": f"I found account {account}. What next?"},
        {"role": "user", "content": last},
    ]


@pytest.mark.parametrize("last,plan", [
    ("Please move it to the free plan, then cancel it.", "free"),  # per request
    (f"Please upgrade {ACCOUNT} to business, then cancel it.", "business"),  # as reported
])
def test_tool_turn_changes_the_plan_of_the_account_of_the_conversation(last: str,
                                                                      plan: str) -> None:
    script = make_script(tool_turn(ACCOUNT, last), TOOLS)
    assert script.tool_name == "change_plan"
    assert arguments(script) == {"account_id": ACCOUNT, "plan": plan}
    assert script.carried.facts == (ACCOUNT,)


def test_a_code_is_one_whole_token_of_the_tool_arguments() -> None:
    script = make_script(billing_messages(ACCOUNT, CONTRACT, "Move the account whose "
                                          "billing history is above to the free plan now."),
                         TOOLS)
    assert ACCOUNT in script.tool_arguments
    assert all(len(t) <= 6 for t in script.tool_arguments if t != ACCOUNT)
