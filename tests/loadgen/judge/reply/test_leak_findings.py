"""What a `token_leak` finding says, as records.jsonl carries it and the report reads it.

The verdict alone says a token leaked; the finding says which token and where (the
content, the reasoning, or a token the scenario configured), which is what a person
needs to tell a missing reasoning parser (a `</think>` in the content) from a chat
template that ends its replies with an EOS the server should have stripped. These pin
the finding's words end to end: `classify` -> the record's JSON line -> the report line.
The path the issue names that no test ran: a configured special token found only in the
reasoning, where the markup rule alone would call it talked about.
"""

from __future__ import annotations

import orjson

from loadgen.judge.findings import Findings, findings_lines
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

CFG = VerdictConfig()
IM_END = VerdictConfig(special_tokens=["<|im_end|>"])
# Named in a sentence: the markup rule reads it as talked about, not leaked.
ABOUT_IM_END = "Every ChatML message ends with <|im_end|>."


def rec(**kw) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", status=200, **kw)


def carried(record: RequestRecord) -> dict:
    """The findings as a line of records.jsonl holds them."""
    return orjson.loads(record.to_json())["findings"]


def test_a_leak_in_the_content_is_named_with_its_token() -> None:
    r = rec(finish_reason="stop", reasoning="Upgrade it.", content="Upgraded.</think>")
    assert classify(r, CFG) == ["token_leak"]
    assert carried(r) == {"leak": "content: '</think>'"}
    assert findings_lines(Findings.read(carried(r))) == ["leak: content: '</think>'"]


def test_a_leak_in_the_reasoning_is_named_as_the_reasoning_s() -> None:
    r = rec(finish_reason="stop", reasoning="Let me think.</think>", content="Done.")
    assert classify(r, CFG) == ["token_leak"]
    assert carried(r) == {"leak": "reasoning: '</think>'"}
    assert findings_lines(Findings.read(carried(r))) == ["leak: reasoning: '</think>'"]


def test_the_content_s_leak_is_the_one_reported_when_both_leak() -> None:
    # The visible answer is what a user sees: its leak comes first.
    r = rec(finish_reason="stop", reasoning="Let me think.</think>", content="Done.<|im_end|>")
    assert classify(r, CFG) == ["token_leak"]
    assert carried(r) == {"leak": "content: '<|im_end|>'"}


def test_a_configured_token_found_only_in_the_reasoning_is_a_leak() -> None:
    # Talked about by the markup rule's reading, so without the configuration it is fine;
    # configured, the token is a leak wherever it stands, and the finding says which.
    r = rec(finish_reason="stop", reasoning=ABOUT_IM_END, content="Done.")
    assert classify(r, CFG) == ["ok"]
    assert carried(r) == {}
    assert classify(r, IM_END) == ["token_leak"]
    assert carried(r) == {"leak": "special token '<|im_end|>'"}
    assert findings_lines(Findings.read(carried(r))) == ["leak: special token '<|im_end|>'"]


def test_a_configured_token_talked_about_in_the_content_is_a_leak() -> None:
    r = rec(finish_reason="stop", reasoning="Answer it.", content=ABOUT_IM_END)
    assert classify(r, CFG) == ["ok"]
    assert classify(r, IM_END) == ["token_leak"]
    assert carried(r) == {"leak": "special token '<|im_end|>'"}


def test_a_configured_token_that_leaked_as_markup_is_named_where_it_leaked() -> None:
    # The markup rule finds it first: the finding says the content, not just the token.
    r = rec(finish_reason="stop", reasoning=ABOUT_IM_END, content="Done.<|im_end|>")
    assert classify(r, IM_END) == ["token_leak"]
    assert carried(r) == {"leak": "content: '<|im_end|>'"}


def test_a_leak_and_a_loop_in_one_reply_both_have_their_finding() -> None:
    sentence = "I will check the account plan again before I answer. "
    r = rec(finish_reason="stop", reasoning="Check it. " + sentence * 6,
            content="Done.<|im_end|>")
    assert classify(r, CFG) == ["reasoning_loop", "token_leak"]
    assert carried(r) == {
        "loop": {"field": "reasoning", "kind": "period", "unit": sentence, "repeats": 6},
        "leak": "content: '<|im_end|>'"}
    assert findings_lines(Findings.read(carried(r))) == [
        f"loop in the reasoning: {sentence!r} x6 (period)", "leak: content: '<|im_end|>'"]
