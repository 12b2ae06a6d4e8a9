"""The sim's model answers the known-answer and session workloads right, from the prompt
alone, and a misread value changes what follows from it (not a scripted mistake)."""

from __future__ import annotations

import json

import pytest

from loadgen.judge.reply.known_answers import answer_problems, argument_problems
from loadgen.scenario import Scenario
from loadgen.workload import make_workload
from loadgen.workload.mix import first_cycle
from server_patch.sim.model import Reply, make_script
from server_patch.sim.skills import alter

WORKLOADS = {
    "known-answer": {"kind": "known-answer", "needle_tokens": [200, 500]},
    "session": {"kind": "session", "sessions": 3, "shared_prefix_tokens": [150]},
}


def items(name: str) -> list:
    return first_cycle(make_workload(Scenario.model_validate(
        {"workload": WORKLOADS[name]})).items())


def written(reply: Reply) -> dict[str, str]:
    """The whole reply, generated token by token."""
    out: dict[str, str] = {}
    while not reply.done:
        piece = reply.next_piece()
        out[piece.channel] = out.get(piece.channel, "") + piece.text
    return out


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_item_is_answered_right_with_reasoning_as_asked(name: str) -> None:
    for item in items(name):
        thinking = item.reasoning is not False
        reply = Reply(make_script(item.messages, item.tools, 0, thinking), 400)
        out = written(reply)
        exp = item.expected
        assert bool(out.get("reasoning")) == thinking, item.item_id
        if exp.call is not None:
            assert out["tool_name"] == exp.call.name, item.item_id
            args = json.loads(out["tool_args"])
            want = exp.call.exact or {k: exp.facts[f] for k, f in exp.call.arguments.items()}
            assert argument_problems(want, args) == [], item.item_id
        else:
            assert reply.finish_reason == "stop"
            assert answer_problems(exp, out["content"]) == [], (item.item_id, out["content"])


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_a_misread_value_makes_the_answer_wrong_in_that_value_only(name: str) -> None:
    for item in items(name)[:40]:
        script = make_script(item.messages, item.tools)
        reply = Reply(script, 400)
        if not script.facts:
            continue
        k = len(item.item_id) % len(script.facts)  # any one of its facts
        assert reply.misread_fact(k, found=12345)
        want = alter(script.facts[k].value, script.facts[k].kind, 12345)
        assert reply.values[k] == want != script.facts[k].value
        out = written(reply)
        text = out.get("tool_args", "") + out.get("content", "")
        exp = item.expected
        if exp.call is not None:
            want_args = exp.call.exact or {key: exp.facts[f]
                                           for key, f in exp.call.arguments.items()}
            assert argument_problems(want_args, json.loads(text)), item.item_id
        else:
            assert answer_problems(exp, text), (item.item_id, text)


def test_a_value_already_written_stays_as_written() -> None:
    item = next(i for i in items("known-answer") if i.tags["probe"] == "echo")
    script = make_script(item.messages, None, 0, thinking=False)
    reply = Reply(script, 400)
    first = reply.next_piece()  # the first identifier is written
    assert not reply.misread_fact(0, found=7)
    assert reply.misread_fact(2, found=7)  # the last one is still to come
    rest = written(reply)
    assert first.text.strip() == script.facts[0].value
    assert script.facts[2].value not in rest["content"]
