"""Each verdict rule, on records shaped like what vLLM streams for DeepSeek-V4."""

from __future__ import annotations

import orjson
import pytest

from loadgen.judge.reply.leaks import find_leak
from loadgen.judge.reply.loops import find_loop, ngram_loop, tail_period_loop
from loadgen.judge.run_level.divergent import divergent_seqs, greedy_entry
from loadgen.judge.verdicts import classify
from loadgen.records import ErrorKind, RequestRecord
from loadgen.scenario import VerdictConfig

CFG = VerdictConfig()

HEALTHY_REASONING = (
    "The user wants account XEHM4B upgraded to the business plan and then cancelled. "
    "Those two requests pull in different directions, but the instruction is explicit: "
    "first the upgrade, then the cancellation. The system prompt says to perform the first "
    "change now, one step at a time, so I should call change_plan with plan business. "
    "Let me check the account record: it is on Pro, 12 seats, active, renewing on "
    "2026-12-01. Upgrading to business is allowed from Pro. After that succeeds, the next "
    "turn can cancel the subscription; I should ask whether the cancellation is immediate "
    "or at the end of the term, since cancel_subscription needs the effective field. "
    "I will not claim that the cancellation happened. Is there any risk in upgrading an "
    "account that will be cancelled right after? The user may be charged a prorated "
    "amount for the business tier, which might be worth mentioning later, but it does not "
    "block the action they asked for. The account id must be passed exactly as XEHM4B. "
    "So the call is change_plan(account_id=XEHM4B, plan=business). "
) * 2
LOOP = "Wait, the user wants to upgrade XEHM4B to business, then cancel it. "
TOOL_CALL = [{"id": "t", "type": "function",
              "function": {"name": "change_plan",
                           "arguments": '{"account_id": "XEHM4B", "plan": "business"}'}}]


def rec(**kw) -> RequestRecord:
    base = dict(run_id="r", scenario="s", phase="measurement", seq=0,
                endpoint="http://x", item_id="i", status=200)
    base.update(kw)
    return RequestRecord(**base)


def test_healthy_tool_call_is_ok() -> None:
    r = rec(finish_reason="tool_calls", reasoning=HEALTHY_REASONING, tool_calls=TOOL_CALL)
    assert classify(r, CFG) == ["ok"]


def test_healthy_answer_is_ok() -> None:
    r = rec(finish_reason="stop", reasoning=HEALTHY_REASONING, content="Done: upgraded.")
    assert classify(r, CFG) == ["ok"]


def test_issue_52448_signature_is_stuck_and_loop() -> None:
    r = rec(finish_reason="length", reasoning=HEALTHY_REASONING[:300] + LOOP * 200)
    assert classify(r, CFG) == ["stuck_in_reasoning", "reasoning_loop"]


def test_stuck_without_loop_is_stuck_only() -> None:
    r = rec(finish_reason="length", reasoning=HEALTHY_REASONING)
    assert classify(r, CFG) == ["stuck_in_reasoning"]


def test_whitespace_content_does_not_count_as_content() -> None:
    r = rec(finish_reason="length", reasoning="thinking...", content="\n\n ")
    assert classify(r, CFG) == ["stuck_in_reasoning"]


@pytest.mark.parametrize("finish,verdicts", [
    ("stop", ["empty_content"]), ("tool_calls", ["empty_content"]),
    (None, ["empty_content", "abnormal_finish"]), ("abort", ["empty_content", "abnormal_finish"]),
])
def test_empty_content_when_finished_otherwise(finish, verdicts) -> None:
    r = rec(finish_reason=finish, reasoning="I will think about it.")
    assert classify(r, CFG) == verdicts


def test_length_with_nothing_at_all_is_empty_content() -> None:
    assert classify(rec(finish_reason="length"), CFG) == ["empty_content"]


def test_tool_calls_count_as_content() -> None:
    r = rec(finish_reason="stop", reasoning="", tool_calls=TOOL_CALL)
    assert classify(r, CFG) == ["ok"]


def test_truncated_answer() -> None:
    r = rec(finish_reason="length", reasoning="Upgrade first.", content="Sure. First I will")
    assert classify(r, CFG) == ["truncated"]
    r = rec(finish_reason="length", tool_calls=TOOL_CALL)
    assert classify(r, CFG) == ["truncated"]


def test_loop_in_content_with_a_normal_finish() -> None:
    r = rec(finish_reason="stop", content="Answer: " + "I will upgrade the account. " * 30)
    assert classify(r, CFG) == ["reasoning_loop"]
    assert find_loop(r, CFG).field == "content"


def test_single_token_repetition_is_a_loop() -> None:
    r = rec(finish_reason="length", reasoning="Let me see. " + "0" * 400)
    loop = find_loop(r, CFG)
    assert loop is not None and set(loop.unit) == {"0"}


def test_tail_period_finds_the_unit_and_repeats() -> None:
    unit, repeats = tail_period_loop("preamble. " + LOOP * 10 + LOOP[:17], 8, 2000, 4, 200)
    assert len(unit) == len(LOOP) and repeats >= 9


def test_tail_period_ignores_a_loop_that_ended() -> None:
    text = LOOP * 10 + HEALTHY_REASONING
    assert tail_period_loop(text, 8, 2000, 4, 200) is None


def test_ngram_loop_with_varying_details() -> None:
    text = " ".join(
        f"Wait, the user wants to upgrade the account to business, then cancel it. "
        f"Step {i}: check plan {i * 7}." for i in range(40))
    assert tail_period_loop(text, 8, 2000, 4, 200) is None  # not exact
    hit = ngram_loop(text, 8, 6, 400)
    assert hit is not None and "upgrade the account" in hit[0] and hit[1] >= 6
    assert classify(rec(finish_reason="length", reasoning=text), CFG) == [
        "stuck_in_reasoning", "reasoning_loop"]


def test_thresholds_are_settable() -> None:
    text = "Short loop. " * 5
    assert find_loop(rec(reasoning=text), CFG) is None
    strict = VerdictConfig(loop_min_chars=20, loop_min_repeats=3)
    assert find_loop(rec(reasoning=text), strict) is not None


@pytest.mark.parametrize("content", [
    "Upgrading now.</think>",
    "<think>hidden</think> Done.",
    "Done.<|im_end|>",
    "Done.<｜end▁of▁sentence｜>",
    "<｜begin▁of▁sentence｜>Done.",
    '<｜DSML｜tool_calls><｜DSML｜invoke name="change_plan">',
    "<tool_call>{\"name\": \"change_plan\"}</tool_call>",
])
def test_token_leak_in_content(content: str) -> None:
    r = rec(finish_reason="stop", content=content)
    assert "token_leak" in classify(r, CFG)


def test_bos_burst_in_reasoning_is_a_leak() -> None:
    r = rec(finish_reason="tool_calls", reasoning="The user <｜begin▁of▁sentence｜>wants",
            tool_calls=TOOL_CALL)
    assert classify(r, CFG) == ["token_leak"]
    assert find_leak(r, CFG).startswith("reasoning")


def test_configured_special_token() -> None:
    cfg = VerdictConfig(special_tokens=["[EOT]"])
    r = rec(finish_reason="stop", content="Done. [EOT]")
    assert classify(r, CFG) == ["ok"]
    assert classify(r, cfg) == ["token_leak"]


@pytest.mark.parametrize("kind,verdict", [
    (ErrorKind.HTTP, "http_error"),
    (ErrorKind.CONNECT, "http_error"),
    (ErrorKind.TRANSPORT, "http_error"),
    (ErrorKind.TIMEOUT, "timeout"),
    (ErrorKind.STREAM, "stream_error"),
    (ErrorKind.BROKEN, "stream_error"),
    (ErrorKind.INTERRUPTED, "interrupted"),
])
def test_transport_failures_take_precedence(kind: ErrorKind, verdict: str) -> None:
    r = rec(finish_reason="length", reasoning=LOOP * 50)
    r.fail(kind, "what happened")
    assert classify(r, CFG) == [verdict]


def test_every_error_kind_has_a_verdict() -> None:
    for kind in ErrorKind:
        r = rec()
        r.fail(kind, "x")
        assert classify(r, CFG)[0] != "ok"


def test_divergent_marks_the_minority_of_identical_greedy_bodies() -> None:
    same = dict(greedy=True, body_hash="h1", finish_reason="tool_calls", tool_calls=TOOL_CALL)
    records = [rec(seq=i, **same) for i in range(5)]
    records.append(rec(seq=5, greedy=True, body_hash="h1", finish_reason="length",
                       reasoning=LOOP * 3))
    records.append(rec(seq=6, greedy=True, body_hash="h2", finish_reason="stop", content="x"))
    records.append(rec(seq=7, greedy=False, body_hash="h1", finish_reason="stop", content="y"))
    records.append(rec(seq=8, greedy=True, body_hash="h1", error="HTTP 500: x",
                       error_kind=ErrorKind.HTTP, verdicts=["http_error"]))
    entries = [e for e in map(entry, records) if e]
    assert divergent_seqs(entries) == {5}


def test_reasoning_differences_alone_are_not_divergence() -> None:
    a = rec(seq=1, greedy=True, body_hash="h", finish_reason="stop", content="x", reasoning="a")
    b = rec(seq=2, greedy=True, body_hash="h", finish_reason="stop", content="x", reasoning="b")
    assert divergent_seqs([entry(a), entry(b)]) == set()


def entry(r: RequestRecord) -> tuple[str, int, bytes] | None:
    """The divergent rule's view of a record as records.jsonl holds it, read as the counting
    pass reads it."""
    return greedy_entry(RequestRecord.read(orjson.loads(r.to_json())), r.verdicts or ["ok"])


# ------------------------------------------------------------------------- tool turns

OFFERED = {"change_plan": ["account_id", "plan"], "get_account": ["account_id"]}


def tool_turn(**kw) -> RequestRecord:
    """A record of a turn that offered the billing tools and expects a call."""
    return rec(params={"tools": OFFERED, "tool_choice": None, "expects_tool_call": True}, **kw)


def call(name: str, arguments: str) -> list[dict]:
    return [{"id": "t", "type": "function", "function": {"name": name, "arguments": arguments}}]


def test_a_tool_turn_answered_in_prose_is_no_tool_call() -> None:
    r = tool_turn(finish_reason="stop", reasoning="Upgrade first.",
                  content="I have upgraded XEHM4B to business.")
    assert classify(r, CFG) == ["no_tool_call"]
    assert r.findings["tool_calls"] == ["a tool call was expected; the reply has none"]
    # Without the expectation (a plain chat), the same reply is fine.
    assert classify(rec(finish_reason="stop", content="I have upgraded it."), CFG) == ["ok"]


@pytest.mark.parametrize("name,arguments,why", [
    ("", '{"account_id": "XEHM4B"}', "no function name"),
    ("delete_account", '{"account_id": "XEHM4B"}', "'delete_account' was not offered"),
    ("change_plan", "account_id=XEHM4B plan=business", "not a JSON object"),
    ("change_plan", '["XEHM4B", "business"]', "not a JSON object"),
    ("change_plan", '{"account_id": "XEHM4B"}', "miss required plan"),
])
def test_a_tool_call_that_cannot_be_executed_is_bad(name, arguments, why) -> None:
    r = tool_turn(finish_reason="tool_calls", tool_calls=call(name, arguments))
    assert classify(r, CFG) == ["bad_tool_call"]
    assert why in r.findings["tool_calls"][0]


def test_arguments_cut_by_length_or_looping_are_tool_args_loop() -> None:
    cut = tool_turn(finish_reason="length",
                    tool_calls=call("change_plan", '{"account_id": "XEHM4B", "plan": "bus'))
    assert classify(cut, CFG) == ["tool_args_loop", "truncated"]
    looping = '{"account_id": "XEHM4B", "plan": "business", "reason": "' + "again and " * 60
    loop = tool_turn(finish_reason="length", tool_calls=call("change_plan", looping))
    verdicts = classify(loop, CFG)
    assert verdicts[0] == "tool_args_loop"
    assert any("arguments end in a loop" in w for w in loop.findings["tool_calls"])


def test_healthy_calls_pass_and_empty_arguments_count_as_an_empty_object() -> None:
    r = tool_turn(finish_reason="tool_calls", tool_calls=[
        *call("get_account", '{"account_id": "XEHM4B"}'),
        *call("change_plan", '{"account_id": "XEHM4B", "plan": "business", "note": "x"}')])
    assert classify(r, CFG) == ["ok"]
    no_args = rec(params={"tools": {"ping": []}, "expects_tool_call": True},
                  finish_reason="tool_calls", tool_calls=call("ping", ""))
    assert classify(no_args, CFG) == ["ok"]


def test_without_knowing_what_was_offered_only_the_call_itself_is_checked() -> None:
    r = rec(finish_reason="tool_calls", tool_calls=call("anything", '{"a": 1}'))
    assert classify(r, CFG) == ["ok"]
    r = rec(finish_reason="tool_calls", tool_calls=call("anything", "not json"))
    assert classify(r, CFG) == ["bad_tool_call"]


@pytest.mark.parametrize("finish", ["abort", "error", "repetition", "content_filter", None])
def test_an_abnormal_finish_is_named(finish) -> None:
    r = tool_turn(finish_reason=finish, tool_calls=TOOL_CALL)
    assert classify(r, CFG) == ["abnormal_finish"]
    assert r.findings["finish"] == (finish or "none")


def test_stuck_says_whether_the_reasoning_loops_or_was_merely_long() -> None:
    looping = rec(finish_reason="length", reasoning=LOOP * 40)
    classify(looping, CFG)
    assert looping.findings["stuck"] == "looping"
    assert looping.findings["loop"]["field"] == "reasoning"
    long = rec(finish_reason="length", reasoning=HEALTHY_REASONING)
    assert classify(long, CFG) == ["stuck_in_reasoning"]
    assert long.findings["stuck"].startswith("long")


def test_a_templated_list_in_the_content_is_not_a_loop() -> None:
    ids = [f"A{i:05d}" for i in range(30)]
    text = "\n".join(f"- Account {a}: plan pro, 12 seats, active, renews 2026-12-01"
                     for a in ids)
    assert ngram_loop(text, 8, 6, 400) is not None  # the template repeats ...
    assert ngram_loop(text, 8, 6, 400, templates=True) is None  # ... with a new id each time
    assert classify(rec(finish_reason="stop", content=text), CFG) == ["ok"]
    # The same sentence over and over in the content is still a loop.
    assert classify(rec(finish_reason="stop", content=LOOP * 30), CFG) == ["reasoning_loop"]
