"""The reference rule's edges: which fields a loaded reply is held to, what its finding
says, and every figure of summary.json's `reference` (a public contract the reports
read: counts, quantiles, per-request rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadgen.judge.run_level import own_verdicts
from loadgen.judge.run_level.reference import (
    ReferenceAgreement,
    agreement,
    answer_text,
    verifiable,
)
from loadgen.records import RequestRecord
from loadgen.scenario import ReferenceConfig, Scenario
from loadgen.taxonomy import Verdict
from tests.support.raw_records import counted

ARGS = '{"account_id": "Q1RST1", "plan": "pro", "note": "as you asked"}'


def call(name: str | None = "change_plan", arguments: str | None = ARGS) -> dict[str, Any]:
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if arguments is not None:
        fn["arguments"] = arguments
    return {"type": "function", "function": fn}


def rec(seq: int, phase: str = "measurement", *, body: str = "b1", reasoning: str = "Move it.",
        content: str = "", calls: list[Any] | None = None,
        verdicts: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    d = {"seq": seq, "phase": phase, "item_id": f"i{seq}", "body_hash": body,
         "reasoning": reasoning, "content": content, "verdicts": verdicts or ["ok"],
         "tool_calls": [call()] if calls is None else calls}
    d.update(extra)
    return d


def judge(records: list[dict[str, Any]], **cfg: Any) -> ReferenceAgreement:
    rule = ReferenceAgreement(ReferenceConfig(requests=1, **cfg))
    for d in records:
        r = RequestRecord.read(d)
        rule.observe(r, own_verdicts(r))
    return rule


def verifiable_of(d: dict[str, Any]) -> tuple[Any, ...]:
    """The verifiable fields of a line as the counting pass reads it."""
    return verifiable(RequestRecord.read(d))


def answer_text_of(d: dict[str, Any]) -> str:
    """The visible answer of a line as the counting pass reads it."""
    return answer_text(RequestRecord.read(d))


def mismatch(records: list[dict[str, Any]], **cfg: Any) -> dict[int, dict[str, Any]]:
    """seq -> its reference_mismatch finding, for every loaded reply held to be unlike."""
    out = {}
    for seq, revision in judge(records, **cfg).revisions().items():
        assert revision.add == {Verdict.REFERENCE_MISMATCH} and not revision.remove
        out[seq] = revision.findings["reference_mismatch"]
    return out


# ------------------------------------------------------------ what a reply is held to

def test_the_finding_names_the_solo_reply_and_shows_both_sides() -> None:
    # What report.md prints: "unlike its solo reply (seq 9): verifiable: loaded ... vs
    # alone ...", the two sides as the JSON of their verifiable fields.
    other = '{"account_id": "Q1RST1", "plan": "free"}'
    found = mismatch([rec(0, calls=[call(arguments=other)]), rec(9, "reference")])
    assert found == {0: {
        "reference_seq": 9, "field": "verifiable",
        "loaded": '["tool_calls",[["change_plan",[["account_id","q1rst1"],["plan","free"]]]]]',
        "reference": '["tool_calls",[["change_plan",[["account_id","q1rst1"],["plan","pro"]]]]]',
    }}


def test_a_reworded_reply_on_a_batch_invariant_server_is_told_why() -> None:
    found = mismatch([rec(0, reasoning="Move it now."), rec(1, "reference")],
                     batch_invariant=True)
    assert found == {0: {"reference_seq": 1, "field": "text",
                         "detail": "the server is declared batch-invariant: the whole reply "
                                   "must match its solo reply word for word"}}


def test_the_shown_fields_are_cut_at_300_characters() -> None:
    # A long verifiable tuple would swamp report.md's one line per finding.
    many = [call("lookup", f'{{"id": "C{i:05d}"}}') for i in range(40)]
    (found,) = mismatch([rec(0, calls=many), rec(1, "reference")]).values()
    assert len(found["loaded"]) == 300 and found["loaded"].startswith('["tool_calls",')
    assert found["reference"].startswith('["tool_calls",[["change_plan"')


def test_numbers_and_flags_in_arguments_are_verifiable() -> None:
    seats = [call("set_seats", '{"account_id": "Q1RST1", "seats": 12, "notify": true}')]
    more = [call("set_seats", '{"account_id": "Q1RST1", "seats": 13, "notify": true}')]
    quiet = [call("set_seats", '{"account_id": "Q1RST1", "seats": 12, "notify": false}')]
    found = mismatch([rec(0, calls=more), rec(1, calls=quiet), rec(2, calls=seats),
                      rec(3, "reference", calls=seats)])
    assert set(found) == {0, 1}


def test_a_value_of_64_characters_without_spaces_is_verifiable_and_65_is_not() -> None:
    def with_id(value: str) -> list[dict[str, Any]]:
        return [call("lookup", f'{{"ref": "{value}"}}')]

    at = mismatch([rec(0, calls=with_id("A" * 63 + "B")), rec(1, "reference",
                                                               calls=with_id("A" * 64))])
    beyond = mismatch([rec(0, calls=with_id("A" * 64 + "B")), rec(1, "reference",
                                                                  calls=with_id("A" * 65))])
    assert set(at) == {0} and beyond == {}


def test_a_call_without_arguments_has_no_fields_and_junk_arguments_say_so() -> None:
    assert verifiable_of(rec(0, calls=[call("get_time", None)])) == \
        ("tool_calls", (("get_time", ()),))
    for junk in ("[1, 2]", "not json", '"a string"'):
        assert verifiable_of(rec(0, calls=[call("lookup", junk)])) == \
            ("tool_calls", (("lookup", ("<not a JSON object>",)),))
    # ...and the finding shows those words, where a side's arguments were no object.
    (found,) = mismatch([rec(0, calls=[call("lookup", "{oops")]),
                         rec(1, "reference", calls=[call("lookup", '{"id": "Q1RST1"}')])
                         ]).values()
    assert found["loaded"] == '["tool_calls",[["lookup",["<not a JSON object>"]]]]'


def test_entries_that_are_no_call_are_skipped_not_the_end_of_the_calls() -> None:
    calls = ["junk", call()]
    assert verifiable_of(rec(0, calls=calls)) == verifiable_of(rec(0))
    assert verifiable_of(rec(0, calls=[{"function": "junk"}, *calls])) == verifiable_of(rec(0))
    assert answer_text_of(rec(0, calls=["junk"])) == "\nNone(None)"
    # A record with such entries is still judged, and agrees with a solo reply that made
    # the same call.
    assert mismatch([rec(0, calls=calls), rec(1, "reference")]) == {}


def test_a_call_without_a_name_is_shown_with_an_empty_name() -> None:
    (found,) = mismatch([rec(0, calls=[call(None, '{"id": "Q1RST1"}')]),
                         rec(1, "reference", calls=[call(None, '{"id": "Q2RST2"}')])
                         ]).values()
    assert found["loaded"] == '["tool_calls",[["",[["id","q1rst1"]]]]]'


def test_a_prose_answer_is_held_to_the_codes_it_states() -> None:
    assert verifiable_of({"content": "Q1RST1 moved; AB12CD too."}) == \
        ("answer", ("AB12CD", "Q1RST1"), ())
    assert verifiable_of({}) == ("answer", (), ())
    found = mismatch([rec(0, calls=[], content="Done for Q1RST1."),
                      rec(1, calls=[], content="Done for Q9RST9."),
                      rec(2, "reference", calls=[], content="Q1RST1 is done.")])
    assert set(found) == {1}


# -------------------------------------------------------------- whose replies count

def test_only_completed_measured_replies_are_held_to_the_solo_reply() -> None:
    free = [call(arguments='{"account_id": "Q1RST1", "plan": "free"}')]
    rule = judge([rec(0, "priming", calls=free),
                  rec(1, "measurement", calls=free, verdicts=["http_error"]),
                  rec(2, "measurement", calls=free),
                  rec(3, "measurement"),
                  rec(4, "reference")])
    assert set(rule.revisions()) == {2}
    summary = rule.summary()
    assert (summary.compared, summary.verifiable_mismatches) == (2, 1)


def test_a_line_without_a_phase_is_held_to_the_solo_reply_as_a_measured_one(
        tmp_path: Path) -> None:
    # The counting pass counts such a line as measured (`RequestRecord.read`), and the
    # rule sees the record it counted.
    free = [call(arguments='{"account_id": "Q1RST1", "plan": "free"}')]
    nameless = rec(0, calls=free)
    del nameless["phase"]
    scenario = Scenario.model_validate({"name": "s", "reference": {"requests": 1}})
    stats = counted(tmp_path, [nameless, rec(1, "reference")], scenario=scenario)
    assert stats.phases["measurement"].requests == 1
    assert stats.seqs_with(Verdict.REFERENCE_MISMATCH) == [0]
    assert stats.reference is not None and stats.reference.compared == 1


def test_records_without_a_body_hash_are_not_compared() -> None:
    rule = judge([rec(0, body=""), rec(1, "reference", body=""),
                  {"seq": 2, "phase": "reference", "verdicts": ["ok"]},
                  {"seq": 3, "phase": "measurement", "verdicts": ["ok"], "content": "x"}])
    assert rule.revisions() == {}
    assert rule.summary().solo_replies == 0 and rule.summary().compared == 0


def test_a_sampled_body_with_no_measured_reply_compares_nothing() -> None:
    rule = judge([rec(0, "reference"), rec(1, "reference", body="b2", verdicts=["timeout"]),
                  rec(2, body="b3")])
    assert rule.revisions() == {}
    summary = rule.summary()
    assert (summary.solo_replies, summary.oracles, summary.compared,
            summary.texts_compared) == (1, 1, 0, 0)


def test_why_a_solo_reply_is_no_oracle_names_all_its_verdicts() -> None:
    rule = judge([rec(0), rec(1, "reference", verdicts=["stream_error", "truncated"]),
                  rec(2, body="b2"),
                  rec(3, "reference", body="b2",
                      verdicts=["stuck_in_reasoning", "reasoning_loop", "truncated"])])
    # Never replied: every verdict it has; replied but broken: the gated ones, sorted.
    assert rule.summary().unusable == {"b1": "stream_error, truncated",
                                          "b2": "reasoning_loop, stuck_in_reasoning, truncated"}


def test_mismatches_are_counted_over_every_compared_reply() -> None:
    free = [call(arguments='{"account_id": "Q1RST1", "plan": "free"}')]
    rule = judge([rec(0, calls=free), rec(1), rec(2), rec(3, "reference")])
    summary = rule.summary()
    assert (summary.compared, summary.verifiable_mismatches) == (3, 1)
    rows = {r["seq"]: r for r in summary.per_request}
    assert [rows[s]["verifiable_equal"] for s in (0, 1, 2)] == [False, True, True]
    assert [rows[s]["identical"] for s in (0, 1, 2)] == [False, True, True]
    assert summary.identical == 2


# --------------------------------------------------------------- the summary's figures

def test_a_summary_states_every_figure() -> None:
    rule = judge([rec(0, content="The plan is pro."), rec(1, "reference",
                                                          content="The plan is free.")])
    summary = rule.summary()
    row = agreement("The plan is pro.\nchange_plan(" + ARGS + ")",
                    "The plan is free.\nchange_plan(" + ARGS + ")")
    assert summary.to_dict() == {
        "solo_replies": 1, "oracles": 1, "unusable": {}, "compared": 1,
        "verifiable_mismatches": 0, "identical": 0, "texts_compared": 1,
        "similarity": {"min": row["similarity"], "p10": row["similarity"],
                       "p50": row["similarity"], "max": row["similarity"]},
        "reasoning_similarity": {"min": 1.0, "p10": 1.0, "p50": 1.0, "max": 1.0},
        "batch_invariant": False,
        "per_request": [{"seq": 0, "reference_seq": 1, "item_id": "i0", "oracle": True,
                         "verifiable_equal": True, "identical": False,
                         "first_divergence": 12, "similarity": row["similarity"],
                         "reasoning_first_divergence": None,
                         "reasoning_similarity": 1.0}],
    }
    assert judge([rec(0)], batch_invariant=True).summary().batch_invariant is True
    # A line without an item id is shown without one.
    nameless = rec(0)
    del nameless["item_id"]
    (row,) = judge([nameless, rec(1, "reference")]).summary().per_request
    assert row["item_id"] == ""


def test_without_texts_the_distribution_is_empty_not_zero() -> None:
    summary = judge([rec(0, "reference")]).summary()
    empty = {"min": None, "p10": None, "p50": None, "max": None}
    assert summary.similarity == empty and summary.reasoning_similarity == empty
    assert summary.per_request == [] and summary.texts_compared == 0


def test_where_the_answers_part_counts_content_then_each_call() -> None:
    loaded = rec(0, content="Done.", calls=[call(arguments='{"note": "as you asked"}')])
    solo = rec(1, "reference", content="Done.", calls=[call(arguments='{"note": "as asked"}')])
    assert answer_text_of(loaded) == 'Done.\nchange_plan({"note": "as you asked"})'
    (row,) = judge([loaded, solo]).summary().per_request
    assert row["first_divergence"] == len('Done.\nchange_plan({"note": "as ')
    assert row["verifiable_equal"] is True and row["similarity"] < 1.0


def test_reasoning_agreement_is_reported_apart_from_the_answer() -> None:
    rows = judge([rec(0, reasoning="XEHM4B moves to pro."),
                  rec(1, reasoning=""),
                  rec(2, reasoning="XEHM4B moves to free."),
                  rec(3, "reference", reasoning="XEHM4B moves to pro.")]).summary().per_request
    by_seq = {r["seq"]: r for r in rows}
    assert (by_seq[0]["reasoning_first_divergence"], by_seq[0]["reasoning_similarity"]) == \
        (None, 1.0)
    # No reasoning at all against a solo reply that reasoned: they part at once.
    assert (by_seq[1]["reasoning_first_divergence"], by_seq[1]["reasoning_similarity"]) == \
        (0, 0.0)
    assert by_seq[2]["reasoning_first_divergence"] == len("XEHM4B moves to ")
    assert by_seq[2]["identical"] is False and by_seq[0]["identical"] is True
    # Any reasoning at all is not the same reply as none.
    for text in ("XXXX", " "):
        (row,) = judge([rec(0, reasoning=text), rec(1, "reference", reasoning="")]
                       ).summary().per_request
        assert row["identical"] is False
    # A solo reply that did not reason, against a loaded one that did.
    (row,) = judge([rec(0, reasoning="XEHM4B"), rec(1, "reference", reasoning="")]
                   ).summary().per_request
    assert (row["reasoning_first_divergence"], row["reasoning_similarity"]) == (0, 0.0)


def test_similarity_is_rounded_to_four_places() -> None:
    assert agreement("abc", "abd") == {"first_divergence": 2, "similarity": 0.6667}


def test_the_distribution_takes_its_quantiles_at_the_nearest_rank() -> None:
    # Four loaded replies, each a little further from the solo answer: min and p10 are
    # the least alike, the median the third of four (rank round(0.5 * 3) = 2), max the most.
    solo = "0123456789"
    answers = ["0123456789", "012345678x", "0123456xxx", "0123xxxxxx"]
    records = [rec(i, content=a, calls=[]) for i, a in enumerate(answers)]
    summary = judge([*records, rec(9, "reference", content=solo, calls=[])]).summary()
    sims = sorted(agreement(a, solo)["similarity"] for a in answers)
    assert len(set(sims)) == 4
    assert summary.similarity == {"min": sims[0], "p10": sims[0], "p50": sims[2],
                                     "max": sims[3]}
    # Two: the median is the upper one.
    two = judge([*records[:2], rec(9, "reference", content=solo, calls=[])]).summary()
    assert two.similarity["p50"] == 1.0 and two.similarity["min"] < 1.0
    # Eleven (one per body: a body keeps the text of eight): p10 is the second least alike.
    many = [rec(i, body=f"b{i}", content=solo[:10 - i] + "x" * i, calls=[]) for i in range(11)]
    solos = [rec(100 + i, "reference", body=f"b{i}", content=solo, calls=[]) for i in range(11)]
    eleven = judge([*many, *solos]).summary()
    sims = sorted(agreement(solo[:10 - i] + "x" * i, solo)["similarity"] for i in range(11))
    assert eleven.similarity["p10"] == sims[1] and eleven.similarity["p50"] == sims[5]


def test_texts_are_kept_for_at_most_eight_loaded_replies_per_body() -> None:
    free = [call(arguments='{"account_id": "Q1RST1", "plan": "free"}')]
    rule = judge([*(rec(i) for i in range(9)), rec(9, calls=free), rec(10, "reference")])
    summary = rule.summary()
    # Every reply is held to the solo one; the text of the first eight is compared.
    assert (summary.compared, summary.verifiable_mismatches) == (10, 1)
    assert summary.texts_compared == 8 and set(rule.revisions()) == {9}
    assert sorted(r["seq"] for r in summary.per_request) == list(range(8))


def test_per_request_rows_stop_at_200_least_alike_first() -> None:
    records = []
    for b in range(26):
        records += [rec(b * 10 + i, body=f"b{b}", content=f"answer {b}" if i else "other",
                        calls=[]) for i in range(8)]
        records.append(rec(1000 + b, "reference", body=f"b{b}", content=f"answer {b}", calls=[]))
    summary = judge(records).summary()
    assert summary.texts_compared == 208 and len(summary.per_request) == 200
    assert [r["similarity"] < 1.0 for r in summary.per_request[:26]] == [True] * 26


# ------------------------------------------------ through the report's counting pass

def test_a_line_without_a_seq_is_judged_as_its_own_record(tmp_path: Path) -> None:
    # A hand-written or foreign line may lack the seq: its mismatch is its own, never
    # lent to the record that is seq 1.
    free = [call(arguments='{"account_id": "Q1RST1", "plan": "free"}')]
    lost = rec(0, calls=free)
    del lost["seq"]
    scenario = Scenario.model_validate({"name": "s", "reference": {"requests": 1}})
    stats = counted(tmp_path, [lost, rec(1), rec(2, "reference")], scenario=scenario)
    assert [(c.seq, c.verdicts) for c in stats.changed] == [(-1, ["reference_mismatch"])]
    ref = stats.reference
    assert ref is not None and sorted(r["seq"] for r in ref.per_request) == [-1, 1]


@pytest.mark.parametrize("requests", [0, 1])
def test_the_reference_rule_runs_only_when_the_scenario_has_the_phase(
        tmp_path: Path, requests: int) -> None:
    free = [call(arguments='{"account_id": "Q1RST1", "plan": "free"}')]
    scenario = Scenario.model_validate({"name": "s", "reference": {"requests": requests}})
    stats = counted(tmp_path, [rec(0, calls=free), rec(1, "reference")], scenario=scenario)
    assert stats.seqs_with(Verdict.REFERENCE_MISMATCH) == ([0] if requests else [])
    assert ("reference" in stats.rule_summaries) is bool(requests)


def test_a_call_whose_function_is_no_object_does_not_stop_the_report(tmp_path: Path) -> None:
    # records.jsonl is read as written, by other writers too: a `function` that is not an
    # object is no call to compare, as `verifiable` already treats it, not a crash of
    # `dsv4-qual report DIR`.
    junk = [{"type": "function", "function": "change_plan"}]
    assert answer_text_of(rec(0, content="Done.", calls=junk)) == "Done.\nNone(None)"
    scenario = Scenario.model_validate({"name": "s", "reference": {"requests": 1}})
    stats = counted(tmp_path, [rec(0, calls=junk, greedy=True), rec(1, calls=junk, greedy=True),
                               rec(2, "reference", calls=junk)], scenario=scenario)
    assert stats.reference is not None
    assert stats.changed == [] and stats.reference.texts_compared == 2


# ------------------------------------------- what must agree, and not the path taken

EXPECTED = {"facts": {"account_id": "Q1RST1", "plan": "pro"}, "distinctive": ["account_id"],
            "call": {"name": "change_plan", "arguments": {"account_id": "account_id",
                                                          "plan": "plan"},
                     "steps": ["get_account"]}}
LOOKUP = call("get_account", '{"account_id": "Q1RST1"}')


def test_a_lookup_first_agrees_with_acting_at_once_on_the_same_account() -> None:
    # Alone it acts at once; under load it looks the account up first (or the reverse),
    # or looks it up and acts in one reply: the path differs, what it does does not.
    for loaded, solo in (([LOOKUP], [call()]), ([call()], [LOOKUP]),
                         ([LOOKUP, call()], [call()])):
        assert mismatch([rec(0, calls=loaded, expected=EXPECTED),
                         rec(1, "reference", calls=solo, expected=EXPECTED)]) == {}
    # Looking up another account, or acting otherwise, is still unlike.
    other = call("get_account", '{"account_id": "Q9RST9"}')
    free = call(arguments='{"account_id": "Q1RST1", "plan": "free"}')
    found = mismatch([rec(0, calls=[other], expected=EXPECTED),
                      rec(1, calls=[LOOKUP, free], expected=EXPECTED),
                      rec(2, "reference", calls=[call()], expected=EXPECTED)])
    assert set(found) == {0, 1}
    # Without an expectation naming the lookups, the calls are held to as they are.
    assert set(mismatch([rec(0, calls=[LOOKUP]), rec(1, "reference")])) == {0}


def test_codes_in_an_answer_are_read_in_any_case_and_look_alike() -> None:
    assert mismatch([rec(0, calls=[], content="Done for q1rst1."),
                     rec(1, calls=[], content="Done for Q1RSТ1."),  # a Cyrillic Т
                     rec(2, "reference", calls=[], content="Q1RST1 is done.")]) == {}


def test_numbers_in_a_prose_answer_are_compared_by_what_they_count() -> None:
    solo = "Account Q1RST1 has 12 seats; the total is 1,234.50 EUR, due 2026-12-01."
    found = mismatch([
        rec(0, calls=[], greedy=True,
            content="Account Q1RST1 has 21 seats; the total is 1,234.50 EUR."),
        rec(1, calls=[], greedy=True,
            content="Account Q1RST1 has 12 seats; the total is 1,243.50 EUR."),
        # Worded otherwise: the same figures, or figures under other labels.
        rec(2, calls=[], greedy=True,
            content="Q1RST1: 12 seats. The total is 1234.5 EUR, due 2026-12-01."),
        rec(3, calls=[], greedy=True,
            content="Account Q1RST1 has 12 seats, renewing in 3 weeks."),
        rec(4, "reference", calls=[], content=solo, greedy=True)])
    assert set(found) == {0, 1}
    assert '["seat","21"]' in found[0]["loaded"]
    assert found[0]["detail"] == "'21' where the solo reply states '12' (seat)"
    # Sampling (temperature above 0) may word an incidental figure otherwise: only the
    # codes are held to.
    sampled = mismatch([rec(0, calls=[], content="Account Q1RST1 has 21 seats."),
                        rec(1, calls=[], content="Account Q9RST9 has 12 seats."),
                        rec(2, "reference", calls=[], content=solo)])
    assert set(sampled) == {1}
