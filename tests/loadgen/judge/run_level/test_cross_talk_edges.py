"""`cross_talk`'s edges: which codes are foreign, which request is named as their
source, when a wrong answer is explained by them, and lines of records.jsonl that lack
a field (a report must still judge them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadgen.judge.findings import Findings
from loadgen.taxonomy import Verdict
from tests.loadgen.judge.run_level.test_cross_talk import judge, record
from tests.support.raw_records import counted

WRONG_ACCOUNT = {"field": "call 0 change_plan.account_id", "fact": "account_id",
                 "expected": "AAAA11", "got": "BBBB22"}


def sources(revisions: dict, seq: int) -> list[dict[str, Any]]:
    return revisions[seq].findings["cross_talk"]["sources"]


def test_a_call_without_a_name_is_named_by_a_question_mark() -> None:
    d = {**record(0, "AAAA11", said="AAAA11", sent=1.0),
         "tool_calls": [{"function": {"arguments": '{"account_id": "SSSS33"}'}},
                        "not a call", {"function": "not an object"}]}
    (source,) = sources(judge([d, record(1, "SSSS33", said="SSSS33", sent=1.0)]), 0)
    assert (source["code"], source["written"], source["where"]) == (
        "SSSS33", "SSSS33", ["call 0 ?"])


def test_one_code_in_several_places_is_listed_once_per_place() -> None:
    d = {"reasoning": "BBBB22 then BBBB22", "content": "BBBB22",
         "tool_calls": [{"function": {"name": "f", "arguments": "BBBB22"}}]}
    revisions = judge([{**record(0, "AAAA11", said="AAAA11", sent=1.0), **d},
                       record(1, "BBBB22", said="BBBB22", sent=1.0)])
    assert sources(revisions, 0)[0]["where"] == ["call 0 f", "content", "reasoning"]


# ------------------------------------------------------------ in flight, or closest

def test_a_request_sent_the_moment_the_suspect_ended_was_in_flight_with_it() -> None:
    # Windows are closed: [10, 11] and [11, 12] share the instant 11.
    after = judge([record(0, "AAAA11", said="BBBB22", sent=10.0, end=1.0),
                   record(1, "BBBB22", said="BBBB22", sent=11.0, end=1.0)])
    before = judge([record(0, "AAAA11", said="BBBB22", sent=10.0, end=1.0),
                    record(1, "BBBB22", said="BBBB22", sent=9.0, end=1.0)])
    for revisions in (after, before):
        assert sources(revisions, 0)[0]["in_flight_together"] is True
    apart = judge([record(0, "AAAA11", said="BBBB22", sent=10.0, end=1.0),
                   record(1, "BBBB22", said="BBBB22", sent=11.001, end=1.0)])
    assert sources(apart, 0)[0]["in_flight_together"] is False


def test_the_first_source_in_flight_is_named() -> None:
    revisions = judge([record(0, "AAAA11", said="BBBB22", sent=10.0, end=5.0),
                       record(3, "BBBB22", said="BBBB22", sent=9.0, end=30.0),
                       record(1, "BBBB22", said="BBBB22", sent=12.0, end=1.0)])
    assert sources(revisions, 0)[0]["source_seq"] == 3


def test_made_up_codes_beside_a_foreign_one_do_not_hide_it() -> None:
    # AAAA00 (first in order) is nobody's; BBBB22 is another request's.
    d = record(0, "AAAA11", said="BBBB22", sent=1.0)
    d["content"] = "AAAA00 and BBBB22"
    revisions = judge([d, record(1, "BBBB22", said="BBBB22", sent=1.0)])
    assert [s["code"] for s in sources(revisions, 0)] == ["BBBB22"]


def test_a_reply_with_only_made_up_codes_does_not_hide_later_ones() -> None:
    revisions = judge([record(0, "AAAA11", said="ZZZZ99", sent=1.0),
                       record(1, "CCCC33", said="BBBB22", sent=1.0),
                       record(2, "BBBB22", said="BBBB22", sent=1.0)])
    assert set(revisions) == {1}


# -------------------------------------------------------------- what is foreign

def test_a_code_the_request_was_given_is_its_own_even_if_another_owns_it() -> None:
    # A document that names another account: the reply may quote it.
    quoting = record(0, "AAAA11", said="AAAA11", sent=1.0)
    quoting["expected"]["facts"]["mentioned"] = "BBBB22"
    quoting["content"] = "As the note about BBBB22 says, done."
    assert judge([quoting, record(1, "BBBB22", said="BBBB22", sent=1.0)]) == {}


def test_a_line_that_lost_its_expectation_is_not_cross_talk_with_its_own_item() -> None:
    twin = record(1, "AAAA11", said="AAAA11", sent=1.0)
    del twin["expected"]
    assert judge([record(0, "AAAA11", said="AAAA11", sent=1.0), twin]) == {}
    # Its codes still name other requests' facts.
    stray = record(2, "CCCC33", said="AAAA11", sent=1.0)
    del stray["expected"]
    revisions = judge([record(0, "AAAA11", said="AAAA11", sent=1.0), stray])
    assert sources(revisions, 2)[0]["source_item"] == "item/AAAA11"


def test_a_workload_without_answers_has_no_cross_talk() -> None:
    bare = [{"seq": i, "phase": "measurement", "item_id": f"r{i}", "content": "ABCD12",
             "verdicts": ["ok"]} for i in range(3)]
    assert judge(bare) == {}


# ------------------------------------------------------- a wrong answer, explained

def test_a_missing_fact_is_explained_when_the_reply_carries_the_sources_value() -> None:
    # The reply summarised another account: its own account is missing, the other's is
    # stated instead. That wrong answer is the cross-talk.
    missing = [{"field": "content", "fact": "account_id", "expected": "AAAA11", "got": None}]
    d = record(0, "AAAA11", said="BBBB22", sent=1.0, verdicts=["wrong_answer"], wrong=missing)
    revisions = judge([d, record(1, "BBBB22", said="BBBB22", sent=1.0)])
    assert revisions[0].remove == {Verdict.WRONG_ANSWER}
    assert revisions[0].apply(["wrong_answer"]) == ["cross_talk"]


def test_a_missing_fact_the_source_does_not_explain_stays_a_wrong_answer() -> None:
    # The plan is missing; the source's plan is not a code the reply carries.
    missing = [{"field": "content", "fact": "plan", "expected": "business", "got": None}]
    d = record(0, "AAAA11", said="BBBB22", sent=1.0, verdicts=["wrong_answer"], wrong=missing)
    revisions = judge([d, record(1, "BBBB22", said="BBBB22", sent=1.0)])
    assert revisions[0].remove == set()
    # ...as is one whose fact the findings do not name.
    unnamed = [{"field": "content", "expected": "business", "got": None}]
    d = record(0, "AAAA11", said="BBBB22", sent=1.0, verdicts=["wrong_answer"], wrong=unnamed)
    assert judge([d, record(1, "BBBB22", said="BBBB22", sent=1.0)])[0].remove == set()


def test_a_stated_value_is_explained_whatever_its_case_and_spaces() -> None:
    wrong = [WRONG_ACCOUNT, {"field": "call 0 change_plan.plan", "fact": "plan",
                             "expected": "business", "got": " Enterprise "}]
    d = record(0, "AAAA11", said="BBBB22", sent=1.0, verdicts=["wrong_answer"], wrong=wrong)
    other = record(1, "BBBB22", said="BBBB22", sent=1.0)
    other["expected"]["facts"]["plan"] = "enterprise"
    assert judge([d, other])[0].remove == {Verdict.WRONG_ANSWER}


def test_wrong_answer_findings_that_are_no_list_explain_nothing() -> None:
    d = record(0, "AAAA11", said="BBBB22", sent=1.0, verdicts=["wrong_answer"])
    d["findings"] = {"wrong_answer": {"fact": "account_id", "got": "BBBB22"}}
    revisions = judge([d, record(1, "BBBB22", said="BBBB22", sent=1.0)])
    assert revisions[0].add == {Verdict.CROSS_TALK} and revisions[0].remove == set()
    # Findings that are no object at all are no wrong answer either.
    d["findings"] = ["not", "an", "object"]
    revisions = judge([d, record(1, "BBBB22", said="BBBB22", sent=1.0)])
    assert revisions[0].remove == set()


# ------------------------------------------------ through the report's counting pass

def test_lines_without_seq_item_or_timings_are_judged(tmp_path: Path) -> None:
    # A line another writer left without seq, item id or timings: its cross-talk is its
    # own (seq -1, never lent to seq 1) and names the source by what it has.
    suspect = record(0, "AAAA11", said="BBBB22", sent=1.0)
    del suspect["seq"], suspect["timings"]
    source = record(5, "BBBB22", said="BBBB22", sent=1_700_000_000.0)
    del source["item_id"]
    stats = counted(tmp_path, [suspect, source, record(1, "CCCC33", said="CCCC33", sent=2.0)])
    (changed,) = stats.changed
    assert (changed.seq, changed.verdicts) == (-1, ["cross_talk"])
    (src,) = changed.findings["cross_talk"]["sources"]
    assert (src["source_item"], src["source_seq"], src["in_flight_together"]) == ("", 5, False)


def test_a_source_without_a_send_time_is_taken_as_sent_at_the_epoch() -> None:
    # Missing timings are 0 (1970): never in flight with a request of this run.
    source = record(1, "BBBB22", said="BBBB22", sent=0.0)
    source["timings"] = {"sent": None, "end": None}
    revisions = judge([record(0, "AAAA11", said="BBBB22", sent=0.5, end=1.0), source])
    assert sources(revisions, 0)[0]["in_flight_together"] is False
    source["timings"] = {"sent": "soon", "end": "later"}
    revisions = judge([record(0, "AAAA11", said="BBBB22", sent=0.5, end=1.0), source])
    assert sources(revisions, 0)[0]["in_flight_together"] is False



def test_a_random_call_id_in_several_replies_is_written_as_one_sentence_each(
        tmp_path: Path) -> None:
    # run_level.jsonl's `tool_call_ids`: a list of sentences (`Findings.tool_call_ids`,
    # report.md's "cross-talk: ..." lines). An id a parser writes from the function's
    # name and position is in every such reply, and names no other request.
    shared = "chatcmpl-tool-7c1e2b9d04f35a68e1c0b7d2946f3a5b"

    def line(seq: int, call_id: str) -> dict[str, Any]:
        return {"seq": seq, "phase": "measurement", "item_id": f"i{seq}", "verdicts": ["ok"],
                "tool_calls": [{"id": call_id, "type": "function",
                                "function": {"name": "get_time", "arguments": "{}"}}]}

    stats = counted(tmp_path, [line(0, shared), line(1, "functions.get_time:0"),
                               line(2, shared), line(3, "functions.get_time:0"),
                               line(4, shared)])
    said = f"tool-call id {shared!r} is also in the reply to seq"
    assert {c.seq: (c.verdicts, c.findings) for c in stats.changed} == {
        0: (["cross_talk"], {"tool_call_ids": [f"{said} 2, 4"]}),
        2: (["cross_talk"], {"tool_call_ids": [f"{said} 0, 4"]}),
        4: (["cross_talk"], {"tool_call_ids": [f"{said} 0, 2"]})}
    assert Findings.read(stats.changed[0].findings).tool_call_ids == [f"{said} 2, 4"]
