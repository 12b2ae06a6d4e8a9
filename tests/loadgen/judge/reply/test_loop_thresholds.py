"""The loop rules' thresholds, each at its edge: at the threshold flagged, one below not.

A threshold that moves by one turns a server's loop into a pass, or an honest reply into
a failure, with no test noticing; these pin each scenario key where it bites, through the
verdict and the finding a person reads (records.jsonl's `findings["loop"]`). The defaults
(scenario.VerdictConfig): a period of 8..2000 characters repeated 4 times over 200
characters (`loop_min_period_chars`, `loop_max_period_chars`, `loop_min_repeats`,
`loop_min_chars`), an 8-word n-gram 6 times in the last 400 words (`ngram_words`,
`ngram_min_repeats`, `ngram_tail_words`), prose that ended 6 times
(`loop_ended_min_repeats`).

The n-gram rule is pinned with the path the issue names that no test ran: a text that
loops through the same words with a changing detail (a word that takes turns among a
few values, never in an order that repeats), so neither period rule sees it.
"""

from __future__ import annotations

import pytest

from loadgen.judge.reply.loops import ngram_loop, ngram_repetitions
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

CFG = VerdictConfig()
UNIT_50 = "Let me check the plan for the account once again. "  # 50 characters
UNIT_49 = "Let me check the plan of the account once again. "  # 49 characters
# The colour of each repeat: a few values taking turns in no repeating order (the last
# four are never one colour, so no single repeat is a period of 4 either).
COLOURS = ["blue", "red", "blue", "red", "red", "blue", "red", "blue", "blue", "red"]


def rec(**kw) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", status=200, **kw)


def cut(content: str) -> RequestRecord:
    return rec(finish_reason="length", reasoning="Plan it.", content=content)


def changing_detail(repeats: int) -> str:
    """One sentence, repeated with its colour changed: the same words otherwise."""
    return "".join(f"I will look at the {c} cable once more before I answer the user. "
                   for c in COLOURS[-repeats:])


def loop_of(record: RequestRecord, cfg: VerdictConfig = CFG) -> dict | None:
    classify(record, cfg)
    return record.findings.get("loop")


# ------------------------------------------------------------------ the period rules

def test_a_cut_loop_covers_loop_min_chars_at_the_threshold() -> None:
    # 4 repeats of 50 characters: 200, the default loop_min_chars.
    r = cut("Sure. " + UNIT_50 * 4)
    assert classify(r, CFG) == ["reasoning_loop", "truncated"]
    assert r.findings["loop"] == {"field": "content", "kind": "period", "unit": UNIT_50,
                                  "repeats": 4}


def test_a_cut_repetition_one_character_short_of_loop_min_chars_is_not_a_loop() -> None:
    # 4 repeats of 49 characters: 196. A fifth repeat reaches the threshold.
    assert classify(cut("Sure. " + UNIT_49 * 4), CFG) == ["truncated"]
    assert loop_of(cut("Sure. " + UNIT_49 * 5)) == {
        "field": "content", "kind": "period", "unit": UNIT_49, "repeats": 5}


def test_a_cut_loop_needs_loop_min_repeats() -> None:
    # 3 repeats of a long unit cover 200 characters, yet are one repeat short.
    long_unit = UNIT_50 + UNIT_49[:-1] + " "
    assert classify(cut("Sure. " + long_unit * 3), CFG) == ["truncated"]
    assert loop_of(cut("Sure. " + long_unit * 4))["repeats"] == 4


def test_the_unit_reported_is_never_shorter_than_loop_min_period_chars() -> None:
    # "0000..." repeats with any multiple of its unit: the report shows the shortest
    # unit of at least 8 characters, counted over the whole run.
    assert loop_of(cut("Sure. " + "abcdefgh" * 30)) == {
        "field": "content", "kind": "period", "unit": "abcdefgh", "repeats": 30}
    assert loop_of(cut("Sure. " + "abcdefg" * 40)) == {
        "field": "content", "kind": "period", "unit": "abcdefg" * 2, "repeats": 20}
    assert loop_of(cut("Sure. " + "0" * 300))["unit"] == "0" * 8


def test_a_unit_longer_than_loop_max_period_chars_is_not_a_period() -> None:
    # Written without spaces, so the n-gram rule (which reads words) has no say.
    cfg = VerdictConfig(loop_max_period_chars=60, loop_min_chars=100)
    unit = "Let_me_check_the_plan_for_the_account_once_again_right_now_."  # 60
    assert loop_of(cut("Sure. " + unit * 6), cfg) == {
        "field": "content", "kind": "period", "unit": unit, "repeats": 6}
    assert loop_of(cut("Sure. " + (unit + "x") * 6), cfg) is None


# --------------------------------------------------------------------- the n-gram rule

@pytest.mark.parametrize("finish", ["length", "stop"])
def test_a_loop_with_a_changing_detail_is_found_by_the_ngram_rule(finish: str) -> None:
    r = rec(finish_reason=finish, reasoning="Plan it.", content="Sure. " + changing_detail(6))
    assert "reasoning_loop" in classify(r, CFG)
    assert r.findings["loop"] == {
        "field": "content", "kind": "ngram",
        "unit": "cable once more before I answer the user. I will look at the red",
        "repeats": 6}


@pytest.mark.parametrize("finish", ["length", "stop"])
def test_a_changing_detail_one_repeat_short_of_ngram_min_repeats_is_not_a_loop(
        finish: str) -> None:
    r = rec(finish_reason=finish, reasoning="Plan it.", content="Sure. " + changing_detail(5))
    assert "reasoning_loop" not in classify(r, CFG)
    assert "loop" not in r.findings


def test_a_cut_reply_is_held_to_ngram_min_repeats() -> None:
    # With ngram_min_repeats above loop_ended_min_repeats, a cut text needs the former.
    cfg = VerdictConfig(ngram_min_repeats=8)
    assert loop_of(cut("Sure. " + changing_detail(7)), cfg) is None
    assert loop_of(cut("Sure. " + changing_detail(8)), cfg)["repeats"] == 8


def test_a_finished_reply_is_held_to_the_lower_of_the_two_repeat_counts() -> None:
    # Prose that ended is a loop from loop_ended_min_repeats, even when the n-gram rule
    # asks more of a cut text: finished prose that restates itself 6 times is a loop.
    cfg = VerdictConfig(ngram_min_repeats=8)
    finished = rec(finish_reason="stop", reasoning="Plan it.",
                   content="Sure. " + changing_detail(6))
    assert loop_of(finished, cfg) == {
        "field": "content", "kind": "ngram",
        "unit": "cable once more before I answer the user. I will look at the red",
        "repeats": 6}
    shorter = rec(finish_reason="stop", reasoning="Plan it.", content="Sure. " + changing_detail(5))
    assert loop_of(shorter, cfg) is None


def test_ngram_loop_calls_a_novelty_at_min_novelty_a_template() -> None:
    # One new id in 20 words each repeat: a novelty of exactly 0.05, "at least" it.
    text = " ".join(
        f"K{7919 * (i + 1):05d}X the ledger entry for this customer matches the invoice we "
        "hold on file and nothing else needs a second." for i in range(20))
    (rep, *_) = ngram_repetitions(text, 8, 6, 400)
    assert rep.novelty == pytest.approx(0.05)
    assert ngram_loop(text, 8, 6, 400) is not None
    assert ngram_loop(text, 8, 6, 400, templates=True, min_novelty=rep.novelty) is None
    assert ngram_loop(text, 8, 6, 400, templates=True, min_novelty=0.051) is not None


# ------------------------------------------------------- novelty at the fewest repeats

def counted(repeats: int) -> str:
    return " ".join(f"Attempt {i}: let me re-read the request now." for i in range(1, repeats + 1))


@pytest.mark.parametrize("repeats,unit", [
    # ngram_min_repeats and loop_ended_min_repeats go down to 2: the one repeat after the
    # first brings nothing new, so a reasoning that says its sentence twice loops.
    (2, "Attempt 1: let me re-read the request now."),
    # Four repeats are enough to see "1, 2, 3" count (it steps; it is not data that
    # walks): the repeats bring nothing new and the reasoning loops.
    (4, "Attempt 3: let me re-read the request now."),
], ids=["said-twice", "counter-of-four"])
def test_a_sentence_repeated_with_only_its_number_counting_is_a_loop(repeats: int,
                                                                      unit: str) -> None:
    cfg = VerdictConfig(ngram_min_repeats=repeats, loop_ended_min_repeats=repeats)
    r = rec(finish_reason="stop", reasoning=counted(repeats), content="Done.")
    assert classify(r, cfg) == ["reasoning_loop"]
    assert r.findings["loop"] == {"field": "reasoning", "kind": "ngram", "unit": unit,
                                  "repeats": repeats}


def invoices(amounts: list[int]) -> str:
    return " ".join(f"Invoice {a} was paid in full by the customer on time." for a in amounts)


@pytest.mark.parametrize("repeats", [3, 4, 5])
def test_records_that_differ_in_their_amount_are_a_template_at_any_repeat_count(
        repeats: int) -> None:
    # With the repeat keys lowered to 3, 4 or 5, a cut reply's list of invoices with
    # distinct amounts walks through values (a template); the same invoice over and over
    # loops. Two repeats after the first are too few to align their numbers (each is new
    # by its value); three align, and three distinct amounts with distinct steps walk.
    cfg = VerdictConfig(ngram_min_repeats=repeats, loop_ended_min_repeats=repeats)
    listed = cut(invoices([4471, 9023, 1288, 5530, 7702][:repeats]))
    assert classify(listed, cfg) == ["truncated"], listed.findings
    again = cut(invoices([4471] * repeats))
    assert classify(again, cfg) == ["reasoning_loop", "truncated"]
    loop = again.findings["loop"]  # five are also 4 exact periods of 55 characters
    assert loop["field"] == "content" and "Invoice 4471 was paid" in loop["unit"]


def test_a_count_that_walks_through_zeros_is_data() -> None:
    # A queue length that comes and goes (0, 0, 1, 0, 2, 0) neither steps nor stays on a
    # few values long enough to loop: it is what the text reports, one new word a repeat.
    text = " ".join(f"The queue holds {n} jobs and the worker waits for the next batch."
                    for n in (0, 0, 1, 0, 2, 0))
    r = rec(finish_reason="stop", reasoning="Report it.", content=text)
    assert classify(r, CFG) == ["ok"], r.findings


def test_novelty_is_the_mean_over_every_repeat_after_the_first() -> None:
    # The same sentence six times, one of them describing its cable with four new words:
    # 4 of 17 words spread over the 4 repeats judged after the first (0.059), a template
    # in the content (from 0.05). A mean that left out a repeat would call it a loop.
    colours = ["blue", "blue", "red wide new fast", "blue", "blue", "blue"]
    text = " ".join(f"I will look at the {c} cable once more before I answer the user."
                    for c in colours)
    (rep, *_) = ngram_repetitions(text, 8, 6, 400)
    assert rep.novelty == pytest.approx(4 / 17 / 4)
    r = rec(finish_reason="stop", reasoning="Report it.", content=text)
    assert classify(r, CFG) == ["ok"], r.findings
