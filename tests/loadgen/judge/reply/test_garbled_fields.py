"""What `garbled` reads of a reply and how it names where: every tool call's arguments
(after one that does not parse, or is not text), calls without a name, replies of no
letters at all, letters with combining marks; and texts too short for a default window
judged alike in ASCII and not when the thresholds are set lower."""

from __future__ import annotations

import json
from typing import Any

from loadgen.judge.reply.garbled import find_garble, garble_in_text
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from tests.support import salad

SALAD = salad.multilingual(0, 60)


def rec(tool_calls: list[Any]) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", finish_reason="tool_calls",
                         reasoning="Change the plan.", content="", tool_calls=tool_calls)


def call(name: str, arguments: Any) -> dict[str, Any]:
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_salad_after_arguments_that_do_not_parse_is_found() -> None:
    found = find_garble(rec([call("change_plan", '{"plan": "busi'),
                             call("change_plan", json.dumps({"reason": SALAD}))]),
                        VerdictConfig())
    assert found is not None and found.field == "call 1 change_plan.reason"


def test_salad_after_arguments_that_are_not_text_is_found() -> None:
    found = find_garble(rec([call("change_plan", {"plan": "business"}),
                             call("change_plan", json.dumps({"reason": SALAD}))]),
                        VerdictConfig())
    assert found is not None and found.field == "call 1 change_plan.reason"


def test_a_call_without_a_name_is_named_by_a_question_mark() -> None:
    found = find_garble(rec([call("", json.dumps({"reason": SALAD}))]), VerdictConfig())
    assert found is not None and found.field == "call 0 ?.reason"


def test_a_call_whose_function_is_not_an_object_is_skipped() -> None:
    record = rec([{"id": "c", "type": "function", "function": "change_plan"},
                  call("change_plan", json.dumps({"reason": SALAD}))])
    found = find_garble(record, VerdictConfig())
    assert found is not None and found.field == "call 1 change_plan.reason"


def test_a_reply_of_numbers_only_is_not_garbled() -> None:
    numbers = ", ".join(str(n * 37 % 1000) for n in range(60))
    assert garble_in_text(numbers, frozenset(), VerdictConfig()) is None
    assert garble_in_text("| 1 | 2 |\n|---|---|\n| 3 | 4 |\n" * 4, frozenset(),
                          VerdictConfig()) is None


def test_a_combining_mark_belongs_to_the_letter_before_it() -> None:
    # A combining acute after a Han character is part of it: Han then Cyrillic, a switch.
    assert garble_in_text("ан的\u0301ан的\u0301ан", frozenset(), VerdictConfig())[0] == "scripts"
    # Russian with stress marks is Russian.
    stressed = "Молоко\u0301 и хле\u0301б на столе\u0301, а ча\u0301й в ча\u0301шке. " * 4
    assert garble_in_text(stressed, frozenset(), VerdictConfig()) is None


def test_short_texts_are_judged_alike_with_lower_thresholds() -> None:
    # Eight spaced letters are salad when the key says so, in an ASCII reply of 15
    # characters as in one with an accent.
    cfg = VerdictConfig(garbled_spaced_letters=8)
    assert garble_in_text("h g f e d c b a", frozenset(), cfg)[0] == "spaced_letters"
    assert garble_in_text("h g f e d c b é", frozenset(), cfg)[0] == "spaced_letters"
    assert garble_in_text("h g f e d c b", frozenset(), cfg) is None
    # A window of eight words of two letters: 23 characters, as short as it comes.
    cfg = VerdictConfig(garbled_spaced_letters=1000, garbled_shuffle_window_words=8,
                        garbled_shuffle_min_distinct=3, garbled_shuffle_max_distinct=6,
                        garbled_noise_window_chars=1000)
    assert garble_in_text("do re mi do fa re mi fa", frozenset(), cfg)[0] == "shuffled_words"
    assert garble_in_text("do re mi do fa re mi fé", frozenset(), cfg)[0] == "shuffled_words"
