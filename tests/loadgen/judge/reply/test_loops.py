"""The loop rules (judge.reply.loops): numbering seen through, templates told from loops,
structured data that ends told from prose that goes round, thresholds pinned."""

from __future__ import annotations

import json
import random

import pytest

from loadgen.judge.reply.loops import (
    find_loop,
    is_prose,
    ngram_repetitions,
    numbering_value,
    text_loop,
    word_key,
)
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from tests.support.legit_corpus import LONG_ANSWER
from tests.support.openai_fake import LOOP_SENTENCE

CFG = VerdictConfig()
TOOL_CALL = [{"id": "t", "type": "function",
              "function": {"name": "change_plan",
                           "arguments": '{"account_id": "XEHM4B", "plan": "business"}'}}]
PREAMBLE = ("The user wants account XEHM4B upgraded to business and then cancelled. "
            "I should do the upgrade first with change_plan. ")
PHRASE = "let me re-read the request."  # short: every 8-gram holds the counter


def rec(**kw) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", status=200, **kw)


def answered(reasoning: str) -> RequestRecord:
    """A reply that reasoned, then made the right tool call (finish tool_calls)."""
    return rec(finish_reason="tool_calls", reasoning=reasoning, tool_calls=TOOL_CALL)


def reasoning_loop(reasoning: str, cfg: VerdictConfig = CFG) -> bool:
    return "reasoning_loop" in classify(answered(reasoning), cfg)


# --------------------------------------------------------------- counters seen through

FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
COUNTERS = {
    "digits": [f"Attempt {i}:" for i in range(5, 25)],
    "hash": [f"#{i}" for i in range(1, 21)],
    "parenthesised": [f"({i})" for i in range(1, 21)],
    "ordinal": [f"The {i}th time," for i in range(4, 24)],
    "words": [f"Attempt {w}:" for w in "one two three four five six seven eight nine ten "
              "eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen".split()],
    "ordinal words": [f"{w.title()} pass:" for w in "first second third fourth fifth sixth "
                      "seventh eighth ninth tenth eleventh twelfth thirteenth".split()],
    "compound words": [f"Try {w}:" for w in "twenty-one twenty-two twenty-three twenty-four "
                       "twenty-five twenty-six twenty-seven twenty-eight twenty-nine".split()],
    "roman": [f"Pass {r}." for r in "I II III IV V VI VII VIII IX X XI XII XIII XIV".split()],
    "letters": [f"({c})" for c in "abcdefghijklmnop"],
    "greek": [f"Attempt {w}:" for w in "alpha beta gamma delta epsilon zeta eta theta iota "
              "kappa lambda mu".split()],
    "nato": [f"Attempt {w}:" for w in "alfa bravo charlie delta echo foxtrot golf hotel "
             "india juliett kilo lima".split()],
    "down by one": [f"Attempt {i}:" for i in range(40, 20, -1)],
    "up by seven": [f"Step {i}:" for i in range(7, 150, 7)],
    "hex": [f"Attempt 0x{i:x}:" for i in range(9, 29)],
    "fraction": [f"Attempt {i}/20:" for i in range(1, 21)],
    "letter and number": [f"Try v{i}:" for i in range(1, 21)],
    "counter at the end": [f"(attempt {i})" for i in range(1, 21)],
    "thousands": [f"Attempt {i:,}:" for i in range(1001, 1021)],
    "section numbers": [f"Step 2.{i}:" for i in range(1, 21)],
    "glued to the word": [f"Attempt-{i}:" for i in range(1, 21)],
    "fullwidth digits": [f"Attempt {str(i).translate(FULLWIDTH)}:" for i in range(1, 21)],
}


@pytest.mark.parametrize("labels", COUNTERS.values(), ids=COUNTERS.keys())
def test_a_loop_that_counts_its_repeats_is_a_loop(labels: list[str]) -> None:
    if labels[0].startswith("("):
        looping = " ".join(f"{PHRASE} {label}" for label in labels)
    else:
        looping = " ".join(f"{label} {PHRASE}" for label in labels)
    r = answered(PREAMBLE + looping)
    assert classify(r, CFG) == ["reasoning_loop"], r.findings
    assert r.findings["loop"]["field"] == "reasoning"


def test_the_reported_loop_with_a_counter() -> None:
    looping = " ".join(f"Attempt {i}: let me re-read the request." for i in range(5, 40))
    r = answered(PREAMBLE + looping)
    assert classify(r, CFG) == ["reasoning_loop"]
    assert "let me re-read the request" in r.findings["loop"]["unit"]
    # ... and stuck by length, its finding says it loops rather than being merely long.
    stuck = rec(finish_reason="length", reasoning=PREAMBLE + looping)
    assert classify(stuck, CFG) == ["stuck_in_reasoning", "reasoning_loop"]
    assert stuck.findings["stuck"] == "looping"


def test_a_counted_loop_of_long_repeats_is_a_counted_period() -> None:
    # 82 words a repeat: past what the n-gram tail holds 6 times, not past the period's.
    paragraph = " ".join(LONG_ANSWER.split()[:80])
    looping = "".join(f"Pass {i}: {paragraph} " for i in range(1, 9))
    assert list(ngram_repetitions(looping, CFG.ngram_words, 6, CFG.ngram_tail_words)) == []
    hit = text_loop(looping, CFG, cut=False, min_novelty=CFG.reasoning_template_min_novelty)
    assert hit is not None and hit[0] == "counted period" and hit[2] == 8
    assert reasoning_loop(looping)


def test_a_counted_loop_without_spaces_is_a_counted_period() -> None:
    looping = "".join(f"第{i}次：让我再读一遍用户的请求，确认他们想要什么。" for i in range(1, 15))
    hit = text_loop(looping, CFG, cut=False, min_novelty=CFG.reasoning_template_min_novelty)
    assert hit is not None and hit[0] == "counted period" and hit[2] == 14


def test_zero_width_characters_inside_a_loop_do_not_hide_it() -> None:
    zwsp, joiner = "\u200b", "\u2060"
    looping = "".join(f"let me re{zwsp * (i % 3)}-read the request{joiner * (i % 2)}. "
                      for i in range(20))
    assert reasoning_loop(PREAMBLE + looping)


def test_nul_characters_inside_a_counted_loop_do_not_hide_it() -> None:
    looping = "".join(f"Attempt {i}:\x00 let me re-read\x00 the request. " for i in range(20))
    assert reasoning_loop(PREAMBLE + looping)


def test_case_and_punctuation_changes_do_not_hide_a_loop() -> None:
    looping = " ".join(f"{'Let' if i % 2 else 'LET'} me re-read the request{'.!?'[i % 3]}"
                       for i in range(20))
    assert reasoning_loop(PREAMBLE + looping)


@pytest.mark.parametrize("core,value", [
    ("5", 5), ("05", 5), ("５", 5), ("5th", 5), ("21st", 21), ("0x1f", 31), ("3/20", 3),
    ("1,005", 1005), ("2.3", 23), ("1.10", 110), ("120.50", 12050), ("1,204.50", 120450),
    ("v5", 5), ("Q3", 3), ("Attempt-5", 5), ("iter_12", 12), ("step5", 5), ("Round#7", 7),
    ("five", 5), ("Fifth", 5), ("twenty-one", 21), ("XIV", 14), ("b", 2), ("delta", 4),
    ("2026-01-05", None), ("12:30", None), ("INV-1001", None), ("A00005", None),
    ("v12345", None), ("Attempt-12345", None), ("mix", None), ("CLIENT", None), ("", None),
    ("1234567890123", None), ("0x1f2e3d4c5b", None),
    # The edges: Roman numerals that add up, upper-case hex, a letter with up to three
    # digits and a word with up to four (a label), one more (an id); hex or a fraction
    # after a label, and two upper-case letters, are ids and versions.
    ("III", 3), ("VIII", 8), ("0X1F", 31), ("v123", 123), ("v1234", None),
    ("step1234", 1234), ("step12345", None), ("v0x1f", None), ("v2.1", None),
    ("PR12", None),
])
def test_what_counts_as_numbering(core: str, value: int | None) -> None:
    assert numbering_value(core) == value


def test_words_are_compared_by_shape_and_value() -> None:
    assert word_key("Attempt") == ("attempt", "attempt", None)
    assert word_key("(5):") == ("\x00", "5", 5)
    assert word_key("request.") == ("request", "request", None)
    assert word_key("A00005:") == ("\x00", "a00005", None)  # an id: its own value
    assert word_key("|") == ("|", "|", None)


# ---------------------------------------------------------- templates are not loops

def repeated(words_per_repeat: int, new_per_repeat: int, repeats: int = 20) -> str:
    """A sentence of `words_per_repeat` words of which `new_per_repeat` are new values in
    each repeat (ids that never come back): novelty new_per_repeat / words_per_repeat."""
    fixed = "the ledger entry for this customer matches the invoice we hold on file and " \
            "nothing else needs a second look before the next one comes up today".split()
    out = []
    for i in range(repeats):
        ids = [f"K{7919 * (i + 1) + 31 * k:05d}X" for k in range(new_per_repeat)]
        out.append(" ".join(ids + fixed[:words_per_repeat - new_per_repeat]) + ".")
    return " ".join(out)


@pytest.mark.parametrize("words,template", [(10, True), (11, False)])
def test_reasoning_template_threshold(words: int, template: bool) -> None:
    # One new value in 10 words is a novelty of 0.1 (the default): a template; in 11, a loop.
    text = repeated(words, 1)
    (rep, *_) = ngram_repetitions(text, CFG.ngram_words, 6, CFG.ngram_tail_words)
    assert rep.novelty == pytest.approx(1 / words)
    assert reasoning_loop(PREAMBLE + text) is not template


@pytest.mark.parametrize("words,template", [(20, True), (21, False)])
def test_content_template_threshold(words: int, template: bool) -> None:
    # In an answer a list may differ in one id: 1 new word in 20 (0.05) is still a template.
    r = rec(finish_reason="stop", content=repeated(words, 1))
    assert ("reasoning_loop" not in classify(r, CFG)) is template, r.findings


def test_template_thresholds_are_scenario_keys() -> None:
    text = PREAMBLE + repeated(10, 1)
    assert not reasoning_loop(text)
    assert reasoning_loop(text, VerdictConfig(reasoning_template_min_novelty=0.11))
    content = rec(finish_reason="stop", content=repeated(12, 1))
    assert classify(content, CFG) == ["ok"]
    assert classify(content, VerdictConfig(template_min_novelty=0.1)) == ["reasoning_loop"]


def test_values_that_return_are_a_loop_not_a_template() -> None:
    # Two ids taking turns: nothing new after the first round.
    looping = " ".join(f"Check {('K4821X', 'P9930Z')[i % 2]} again, the user wants it done."
                       for i in range(24))
    assert reasoning_loop(PREAMBLE + looping)


def test_numbers_that_walk_are_values_and_numbers_that_count_are_not() -> None:
    rng = random.Random(7)
    walking = " ".join(f"Region {i}: {rng.randint(100, 9000)} requests and "
                       f"{rng.randint(0, 99)} errors, all within the budget." for i in range(1, 21))
    counting = " ".join(f"Region {i}: {100 + 10 * i} requests and {i} errors, all within "
                        "the budget." for i in range(1, 21))
    assert not reasoning_loop(PREAMBLE + walking)
    assert reasoning_loop(PREAMBLE + counting)


def test_a_walk_over_rows_is_a_template() -> None:
    rows = " ".join(f"Row {i}: customer C{(i * 7919) % 100000:05d} owes "
                    f"{(i * 7919) % 5000 + 100}.{i % 100:02d} USD, due 2026-0{i % 9 + 1}-1{i % 9}."
                    for i in range(1, 30))
    assert not reasoning_loop(PREAMBLE + rows)
    cut = rec(finish_reason="length", reasoning=PREAMBLE + rows)
    assert classify(cut, CFG) == ["stuck_in_reasoning"]
    assert cut.findings["stuck"].startswith("long")


# ----------------------------------------------------- ended, cut, prose, structured

@pytest.mark.parametrize("repeats,loop", [(5, False), (6, True)])
def test_prose_that_ended_loops_from_loop_ended_min_repeats(repeats: int, loop: bool) -> None:
    assert reasoning_loop(PREAMBLE + LOOP_SENTENCE * repeats) is loop
    content = rec(finish_reason="stop", content="Sure. " + LOOP_SENTENCE * repeats)
    assert ("reasoning_loop" in classify(content, CFG)) is loop


def test_loop_ended_min_repeats_is_a_scenario_key() -> None:
    text = PREAMBLE + LOOP_SENTENCE * 5
    assert not reasoning_loop(text)
    assert reasoning_loop(text, VerdictConfig(loop_ended_min_repeats=5))


@pytest.mark.parametrize("repeats,loop", [(3, False), (4, True)])
def test_a_cut_text_loops_from_loop_min_repeats(repeats: int, loop: bool) -> None:
    r = rec(finish_reason="length", reasoning=PREAMBLE + LOOP_SENTENCE * repeats)
    assert ("reasoning_loop" in classify(r, CFG)) is loop
    assert r.findings["stuck"] == ("looping" if loop else "long (no loop in the reasoning)")


def test_the_fake_servers_loop_repeats_a_sentence_a_dozen_times_then_answers() -> None:
    assert reasoning_loop(PREAMBLE + LOOP_SENTENCE * 12)


def grid(n: int) -> str:
    return "\n".join(" ".join("0" for _ in range(n)) for _ in range(n))


def identity(n: int) -> str:
    return "\n".join(" ".join("1" if i == j else "0" for j in range(n)) for i in range(n))


STRUCTURED = {
    "zero grid": grid(16),
    "identity matrix": identity(16),
    "identical objects": json.dumps([{"status": "pending", "retries": 0}] * 30, indent=2),
    "identical objects with a phrase": json.dumps([{"task": "Review the draft"}] * 30),
    "identical table rows": "\n".join(["| pending | 0 | none |"] * 30),
}


@pytest.mark.parametrize("text", STRUCTURED.values(), ids=STRUCTURED.keys())
def test_structured_data_that_ends_is_not_a_loop(text: str) -> None:
    r = rec(finish_reason="stop", content=f"Here it is:\n\n{text}\n", reasoning="Write it.")
    assert classify(r, CFG) == ["ok"], r.findings
    assert not reasoning_loop(f"Let me draft it first:\n{text}\nThat is right.")


@pytest.mark.parametrize("text", STRUCTURED.values(), ids=STRUCTURED.keys())
def test_structured_data_cut_by_length_in_its_repeats_is_a_loop(text: str) -> None:
    cut = text[:len(text) * 3 // 4]
    r = rec(finish_reason="length", content=f"Here it is:\n\n{cut}", reasoning="Write it.")
    assert classify(r, CFG) == ["reasoning_loop", "truncated"], r.findings
    assert find_loop(r, CFG).field == "content"
    stuck = rec(finish_reason="length", reasoning=f"Let me draft it first:\n{cut}")
    assert classify(stuck, CFG) == ["stuck_in_reasoning", "reasoning_loop"]


@pytest.mark.parametrize("content", ["", ".", "\u200b", "Sure"])
def test_a_reasoning_that_ran_in_circles_to_the_cut_is_a_loop_whatever_follows(
        content: str) -> None:
    r = rec(finish_reason="length", reasoning="Let me draft it first:\n" + grid(40),
            content=content)
    assert "reasoning_loop" in classify(r, CFG), r.findings
    assert r.findings["loop"]["field"] == "reasoning"


ROUND = ("Row, row, row your boat,\nGently down the stream.\n"
         "Merrily, merrily, merrily, merrily,\nLife is but a dream.")


@pytest.mark.parametrize("voices,loop", [(5, False), (6, True)])
def test_a_round_is_prose_held_to_loop_ended_min_repeats(voices: int, loop: bool) -> None:
    content = "\n\n".join(f"Voice {i}:\n{ROUND}" for i in range(1, voices + 1))
    r = rec(finish_reason="stop", content=content, reasoning="Write the round out.")
    assert ("reasoning_loop" in classify(r, CFG)) is loop


@pytest.mark.parametrize("unit,prose", [
    ("Wait, the user wants to upgrade XEHM4B to business, then cancel it.", True),
    ("Row, row, row your boat, gently down the stream.", True),
    ("让我再读一遍用户的请求。", True),
    ("0 0 0 0 0 0 0 0", False),
    ("7 x 3 = 21", False),
    ('{"task": "Review the contract draft", "done": false},', False),
    ('- task: "Review the contract draft" done: false', False),
    ("| pending | review the draft | none |", False),
    ("<item>review the contract draft</item>", False),
    ("Short loop.", False),
])
def test_prose_against_structured_data(unit: str, prose: bool) -> None:
    assert is_prose(unit) is prose


def test_a_templated_list_that_ends_in_a_loop_is_still_found() -> None:
    # A template first (many repeats), then a loop (fewer): the loop is judged too.
    table = " ".join(f"Row {i}: C{(i * 7919) % 100000:05d} owes {(i * 37) % 900 + 100}.50 "
                     "USD." for i in range(1, 40))
    r = answered(PREAMBLE + table + " " + LOOP_SENTENCE * 8)
    assert classify(r, CFG) == ["reasoning_loop"], r.findings


# ------------------------------------------------------------------ tool arguments

OFFERED = {"change_plan": ["account_id", "plan"],
           "send_email": ["account_id", "subject", "body"]}


def tool_turn(arguments: dict | str, name: str = "change_plan", finish: str = "tool_calls"
              ) -> RequestRecord:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return rec(params={"tools": OFFERED, "tool_choice": None, "expects_tool_call": True},
               finish_reason=finish, reasoning="Do it.",
               tool_calls=[{"id": "t", "type": "function",
                            "function": {"name": name, "arguments": raw}}])


@pytest.mark.parametrize("value", [[0] * 300, [False] * 300, ["pending"] * 300, [None] * 300,
                                   [{"sku": "SEAT", "qty": 1}] * 80,
                                   ["re-read the request before acting on it"] * 50])
def test_a_repeated_value_in_arguments_is_not_a_loop(value: list) -> None:
    r = tool_turn({"account_id": "XEHM4B", "plan": "business", "items": value})
    assert classify(r, CFG) == ["ok"], r.findings


@pytest.mark.parametrize("repeats,loop", [(5, False), (6, True)])
def test_a_string_value_that_restates_itself_is_tool_args_loop(repeats: int, loop: bool) -> None:
    body = "Thank you for your order. " + "We will upgrade your account to business. " * repeats
    r = tool_turn({"account_id": "XEHM4B", "subject": "Upgrade", "body": body}, "send_email")
    verdicts = classify(r, CFG)
    assert ("tool_args_loop" in verdicts) is loop, r.findings
    if loop:
        assert "an argument value loops" in r.findings["tool_calls"][0]


def test_a_counted_loop_in_a_string_value_is_tool_args_loop() -> None:
    reason = " ".join(f"Attempt {i}: the user wants the upgrade." for i in range(1, 20))
    r = tool_turn({"account_id": "XEHM4B", "plan": "business", "reason": reason})
    assert classify(r, CFG) == ["tool_args_loop"]


def test_arguments_cut_by_length_say_when_they_loop() -> None:
    head = '{"account_id": "XEHM4B", "plan": "business", "reason": "'
    cut = tool_turn(head + "the user wants the upgrade and " * 40, finish="length")
    assert classify(cut, CFG)[0] == "tool_args_loop"
    assert any("arguments end in a loop" in w for w in cut.findings["tool_calls"])
    assert any("cut by length before they close" in w for w in cut.findings["tool_calls"])
    # Cut in the middle of an array of one value: still cut before they close, and the
    # array ran on to the cut (#52448's signature: structured data cut in its repeats).
    array = tool_turn('{"account_id": "XEHM4B", "plan": "business", "flags": [' + "0, " * 200,
                      finish="length")
    assert classify(array, CFG) == ["tool_args_loop", "truncated"]
    assert array.findings["tool_calls"] == [
        "call 0 (change_plan): arguments end in a loop of '0, 0, 0, ' x66",
        "call 0 (change_plan): arguments cut by length before they close"]
