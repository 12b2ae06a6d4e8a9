"""The reference rule on records: what a loaded reply is held to, and what is reported."""

from __future__ import annotations

from typing import Any

from loadgen.judge.run_level import own_verdicts
from loadgen.judge.run_level.reference import ReferenceAgreement, agreement, verifiable
from loadgen.records import RequestRecord
from loadgen.scenario import ReferenceConfig
from loadgen.taxonomy import Verdict


def rec(seq: int, phase: str, *, plan: str = "pro", reasoning: str = "Move it.",
        verdicts: list[str] | None = None, body: str = "b1") -> dict[str, Any]:
    return {"seq": seq, "phase": phase, "item_id": "i", "body_hash": body,
            "reasoning": reasoning, "content": "", "verdicts": verdicts or ["ok"],
            "tool_calls": [{"function": {"name": "change_plan",
                                         "arguments": f'{{"account_id": "Q1RST1", "plan": '
                                                      f'"{plan}", "note": "as you asked"}}'}}]}


def judge(records: list[dict[str, Any]], **cfg: Any) -> ReferenceAgreement:
    rule = ReferenceAgreement(ReferenceConfig(requests=1, **cfg))
    for d in records:
        r = RequestRecord.read(d)
        rule.observe(r, own_verdicts(r))
    return rule


def verifiable_of(d: dict[str, Any]) -> tuple[Any, ...]:
    """The verifiable fields of a line as the counting pass reads it."""
    return verifiable(RequestRecord.read(d))


def test_short_scalars_are_verifiable_and_free_text_is_not() -> None:
    fields = verifiable_of(rec(0, "measurement"))
    assert fields == ("tool_calls", (("change_plan", (("account_id", "q1rst1"),
                                                      ("plan", "pro"))),))
    assert verifiable_of({"content": "Account Q1RST1 is on pro."}) == ("answer", ("Q1RST1",), ())


def test_a_loaded_reply_is_held_to_its_solo_reply() -> None:
    rule = judge([rec(0, "measurement"), rec(1, "measurement", plan="free"),
                  rec(2, "reference")])
    revisions = rule.revisions()
    assert set(revisions) == {1}
    assert revisions[1].add == {Verdict.REFERENCE_MISMATCH}
    assert revisions[1].findings["reference_mismatch"]["reference_seq"] == 2
    summary = rule.summary()
    assert (summary.compared, summary.verifiable_mismatches) == (2, 1)


def test_wording_is_held_only_on_a_batch_invariant_server() -> None:
    records = [rec(0, "measurement", reasoning="Move it now."), rec(1, "reference")]
    assert judge(records).revisions() == {}
    (revision,) = judge(records, batch_invariant=True).revisions().values()
    assert revision.findings["reference_mismatch"]["field"] == "text"


def test_a_broken_solo_reply_is_no_oracle_but_agreement_is_still_reported() -> None:
    rule = judge([rec(0, "measurement", plan="free"),
                  rec(1, "reference", verdicts=["stuck_in_reasoning"])])
    assert rule.revisions() == {}
    summary = rule.summary()
    assert summary.oracles == 0 and summary.unusable == {"b1": "stuck_in_reasoning"}
    assert summary.texts_compared == 1 and summary.per_request[0]["oracle"] is False
    # A solo request that never got a reply is left out altogether.
    gone = judge([rec(0, "measurement"), rec(1, "reference", verdicts=["http_error"])])
    assert gone.summary().solo_replies == 0 and gone.revisions() == {}


def test_agreement_says_where_two_texts_part_and_how_alike_they_are() -> None:
    assert agreement("same", "same") == {"first_divergence": None, "similarity": 1.0}
    part = agreement("The plan is pro.", "The plan is free.")
    assert part["first_divergence"] == 12 and 0.5 < part["similarity"] < 1.0


def test_the_sample_is_of_distinct_bodies_evenly_over_the_measured_range(tmp_path) -> None:
    from loadgen.engine.plan import RunPlan
    from loadgen.engine.requests import RequestMaker
    from loadgen.scenario import Scenario

    def reference_items(sc: Scenario, chars_per_token: float | None) -> tuple:
        return RunPlan.build(sc, chars_per_token, RequestMaker(sc, "", "")).reference

    lines = [f'{{"messages": [{{"role": "user", "content": "q{i % 4}"}}]}}' for i in range(8)]
    (tmp_path / "b.jsonl").write_text("\n".join(lines))
    sc = Scenario.model_validate({
        "workload": {"kind": "replay", "path": str(tmp_path / "b.jsonl")},
        "load": {"priming": 2, "measurement": 64}, "reference": {"requests": 4}})
    items = reference_items(sc, None)
    # 8 lines, 4 distinct bodies: each once, though 8 item ids were measured.
    assert sorted(i.messages[0]["content"] for i in items) == ["q0", "q1", "q2", "q3"]
    few = sc.model_copy(update={"reference": sc.reference.model_copy(update={"requests": 2})})
    assert [i.messages[0]["content"] for i in reference_items(few, None)] == ["q2", "q0"]
