"""`cross_talk`: another request's facts in a reply, judged across the run's records."""

from __future__ import annotations

from typing import Any

from loadgen.expectations import Expectation, ExpectedCall
from loadgen.judge.run_level import Revision, combine, own_verdicts
from loadgen.judge.run_level.cross_talk import CrossTalk
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict


def expectation(account: str, plan: str = "business") -> dict[str, Any]:
    return Expectation(facts={"account_id": account, "plan": plan},
                       distinctive=("account_id",),
                       call=ExpectedCall("change_plan", {"account_id": "account_id",
                                                         "plan": "plan"})).to_dict()


def record(seq: int, account: str, *, said: str, sent: float, end: float = 1.0,
           verdicts: list[str] | None = None, wrong: list[dict] | None = None,
           plan: str = "business", where: str = "call") -> dict[str, Any]:
    args = f'{{"account_id": "{said}", "plan": "{plan}"}}'
    d: dict[str, Any] = {
        "seq": seq, "phase": "measurement", "item_id": f"item/{account}",
        "timings": {"sent": sent, "end": end}, "expected": expectation(account),
        "reasoning": f"The user wants {said} moved." if where == "reasoning" else "Move it.",
        "content": "", "verdicts": verdicts or ["ok"],
        "findings": {"wrong_answer": wrong} if wrong else {},
        "tool_calls": [{"function": {"name": "change_plan", "arguments": args}}],
    }
    if where == "reasoning":
        d["tool_calls"][0]["function"]["arguments"] = \
            f'{{"account_id": "{account}", "plan": "{plan}"}}'
    return d


def judge(records: list[dict[str, Any]]) -> dict[int, Revision]:
    """The rule over records as the counting pass reads their lines."""
    rule = CrossTalk()
    for d in records:
        r = RequestRecord.read(d)
        rule.observe(r, own_verdicts(r))
    return combine([rule])


def test_a_reply_on_another_requests_account_names_the_source_in_flight_with_it() -> None:
    wrong = [{"field": "call 0 change_plan.account_id", "fact": "account_id",
              "expected": "AAAA11", "got": "BBBB22"}]
    revisions = judge([
        record(0, "AAAA11", said="BBBB22", sent=10.0, verdicts=["wrong_answer"], wrong=wrong),
        record(1, "BBBB22", said="BBBB22", sent=10.5),
        record(2, "BBBB22", said="BBBB22", sent=50.0),
    ])
    assert set(revisions) == {0}
    revision = revisions[0]
    assert revision.add == {Verdict.CROSS_TALK} and revision.remove == {Verdict.WRONG_ANSWER}
    (source,) = revision.findings["cross_talk"]["sources"]
    assert source == {"code": "BBBB22", "written": "BBBB22", "part": False,
                      "where": ["call 0 change_plan"],
                      "source_item": "item/BBBB22", "source_seq": 1,
                      "in_flight_together": True}
    assert revision.apply(["wrong_answer"]) == ["cross_talk"]


def test_when_no_source_was_in_flight_the_closest_in_time_is_named() -> None:
    revisions = judge([record(0, "AAAA11", said="BBBB22", sent=100.0),
                       record(1, "BBBB22", said="BBBB22", sent=10.0),
                       record(2, "BBBB22", said="BBBB22", sent=90.0)])
    (source,) = revisions[0].findings["cross_talk"]["sources"]
    assert source["source_seq"] == 2 and source["in_flight_together"] is False


def test_foreign_facts_in_the_reasoning_alone_are_cross_talk() -> None:
    revisions = judge([record(0, "AAAA11", said="BBBB22", sent=1.0, where="reasoning"),
                       record(1, "BBBB22", said="BBBB22", sent=1.0)])
    assert revisions[0].findings["cross_talk"]["sources"][0]["where"] == ["reasoning"]
    assert revisions[0].remove == set()


def test_a_wrong_field_another_request_does_not_explain_stays_a_wrong_answer() -> None:
    wrong = [{"field": "call 0 change_plan.account_id", "fact": "account_id",
              "expected": "AAAA11", "got": "BBBB22"},
             {"field": "calls", "fact": "function", "expected": "change_plan",
              "got": "cancel_subscription"}]
    revisions = judge([record(0, "AAAA11", said="BBBB22", sent=1.0, verdicts=["wrong_answer"],
                              wrong=wrong),
                       record(1, "BBBB22", said="BBBB22", sent=1.0)])
    assert revisions[0].remove == set()
    assert revisions[0].apply(["wrong_answer"]) == ["cross_talk", "wrong_answer"]


def test_codes_no_request_owns_and_shared_facts_are_not_cross_talk() -> None:
    # A made-up code is nobody's; the reported account is in every prompt (not distinctive).
    shared = record(1, "XEHM4B", said="XEHM4B", sent=1.0)
    shared["expected"]["distinctive"] = []
    revisions = judge([record(0, "AAAA11", said="ZZZZ99", sent=1.0), shared,
                       record(2, "AAAA11", said="XEHM4B", sent=1.0)])
    assert revisions == {}


def test_twins_of_one_item_share_their_facts() -> None:
    assert judge([record(0, "AAAA11", said="AAAA11", sent=1.0),
                  record(1, "AAAA11", said="AAAA11", sent=1.0)]) == {}


def test_a_reply_that_never_came_is_not_judged() -> None:
    broken = record(0, "AAAA11", said="BBBB22", sent=1.0, verdicts=["http_error"])
    assert judge([broken, record(1, "BBBB22", said="BBBB22", sent=1.0)]) == {}


def test_codes_are_found_in_every_part_of_a_reply() -> None:
    d = {**record(0, "AAAA11", said="AAAA11", sent=1.0),
         "reasoning": "about QQQQ11", "content": "done for RRRR22",
         "tool_calls": [{"function": {"name": "get_account",
                                      "arguments": '{"account_id": "SSSS33"}'}}]}
    owners = [record(i, code, said=code, sent=1.0)
              for i, code in enumerate(("QQQQ11", "RRRR22", "SSSS33"), 1)]
    found = {source["code"]: source["where"]
             for source in judge([d, *owners])[0].findings["cross_talk"]["sources"]}
    assert (found["QQQQ11"], found["RRRR22"], found["SSSS33"]) == (
        ["reasoning"], ["content"], ["call 0 get_account"])
