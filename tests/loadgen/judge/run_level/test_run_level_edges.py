"""The run-level mechanism end to end in-process: which rules a scenario gets, how the
revisions of several rules on one record combine into its final verdicts (what every
report counts), the `divergent` rule over records.jsonl, and run_level.jsonl, the file
a reader takes final verdicts from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from loadgen.judge.gate.run_report import rules_for
from loadgen.judge.run_level.divergent import answer_key
from loadgen.records import RequestRecord
from loadgen.results.run_level import RUN_LEVEL_FILE, read_run_level, write_run_level
from loadgen.scenario import Scenario
from loadgen.taxonomy import Verdict
from tests.loadgen.judge.run_level.test_cross_talk import expectation
from tests.support.raw_records import counted

CALL = [{"type": "function",
         "function": {"name": "change_plan",
                      "arguments": '{"account_id": "AAAA11", "plan": "business"}'}}]


def greedy(seq: int, *, body: str = "h1", content: str = "", phase: str = "measurement",
           calls: list[Any] | None = None, finish: str = "tool_calls",
           verdicts: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    d = {"seq": seq, "phase": phase, "item_id": f"i{seq}", "greedy": True, "body_hash": body,
         "finish_reason": finish, "content": content,
         "tool_calls": CALL if calls is None else calls, "verdicts": verdicts or ["ok"],
         "timings": {"sent": 1_700_000_000.0 + seq, "end": 0.5}}
    d.update(extra)
    return d


def answer_key_of(d: dict[str, Any]) -> bytes:
    """The answer key of a line as the counting pass reads it."""
    return answer_key(RequestRecord.read(d))


def final(stats: Any) -> dict[int, list[str]]:
    return {c.seq: c.verdicts for c in stats.changed}


# ----------------------------------------------------------------- which rules run

def test_every_scenario_gets_divergent_and_cross_talk(tmp_path: Path) -> None:
    names = [r.name for r in rules_for(Scenario(name="s"))]
    assert names == ["divergent", "cross_talk", "restated"]
    with_reference = Scenario.model_validate({"name": "s", "reference": {"requests": 1}})
    assert [r.name for r in rules_for(with_reference)] == ["divergent", "cross_talk",
                                                           "restated", "reference"]
    stats = counted(tmp_path, [greedy(0), greedy(1), greedy(2, finish="length")])
    assert final(stats) == {2: ["divergent"]}


# ------------------------------------------------------- final verdicts of a record

def test_an_ok_record_a_rule_revises_is_no_longer_ok(tmp_path: Path) -> None:
    stats = counted(tmp_path, [greedy(0), greedy(1), greedy(2, content="other")])
    assert final(stats) == {2: ["divergent"]}
    assert dict(stats.phases["measurement"].verdicts) == {"ok": 2, "divergent": 1}


def test_verdicts_of_two_rules_on_one_record_are_both_kept(tmp_path: Path) -> None:
    # seq 2 disagrees with its greedy twins and states another request's account.
    other = [{"type": "function", "function": {
        "name": "change_plan", "arguments": '{"account_id": "BBBB22", "plan": "business"}'}}]
    records = [greedy(0, expected=expectation("AAAA11")),
               greedy(1, expected=expectation("AAAA11")),
               greedy(2, calls=other, expected=expectation("AAAA11")),
               greedy(3, body="h2", calls=other, expected=expectation("BBBB22"))]
    stats = counted(tmp_path, records)
    assert final(stats) == {2: ["cross_talk", "divergent"]}
    (changed,) = stats.changed
    assert changed.run_level == ["cross_talk", "divergent"]


def test_a_wrong_answer_explained_stays_explained_when_another_rule_revises_too(
        tmp_path: Path) -> None:
    # cross_talk replaces the wrong answer; reference_mismatch (a later rule) on the same
    # record must not bring it back.
    other = [{"type": "function", "function": {
        "name": "change_plan", "arguments": '{"account_id": "BBBB22", "plan": "business"}'}}]
    wrong = [{"field": "call 0 change_plan.account_id", "fact": "account_id",
              "expected": "AAAA11", "got": "BBBB22"}]
    records = [greedy(0, calls=other, greedy=False, verdicts=["wrong_answer"],
                      findings={"wrong_answer": wrong}, expected=expectation("AAAA11")),
               greedy(1, phase="reference", greedy=False, expected=expectation("AAAA11")),
               greedy(2, body="h2", calls=other, expected=expectation("BBBB22"))]
    scenario = Scenario.model_validate({"name": "s", "reference": {"requests": 1}})
    stats = counted(tmp_path, records, scenario=scenario)
    assert final(stats) == {0: ["cross_talk", "reference_mismatch"]}
    assert stats.changed[0].replaced == ["wrong_answer"]
    assert "wrong_answer" not in stats.phases["measurement"].verdicts


@pytest.mark.parametrize("own", [None, [], ["divergent"]])
def test_a_record_without_verdicts_of_its_own_counts_as_ok(tmp_path: Path,
                                                           own: list[str] | None) -> None:
    # No list, an empty one, or only a run-level verdict stored by an older version
    # (judged anew here): the reply's own verdict is ok.
    d = greedy(0, greedy=False)
    if own is None:
        del d["verdicts"]
    else:
        d["verdicts"] = own
    stats = counted(tmp_path, [d])
    assert dict(stats.phases["measurement"].verdicts) == {"ok": 1} and stats.changed == []


# ---------------------------------------------------------------------- divergent

def test_two_greedy_twins_that_disagree_mark_the_later_one(tmp_path: Path) -> None:
    # With no majority, the first answer seen stands for the body.
    stats = counted(tmp_path, [greedy(0), greedy(1, content="other")])
    assert stats.seqs_with(Verdict.DIVERGENT) == [1]


def test_a_lone_body_does_not_hide_the_twins_after_it(tmp_path: Path) -> None:
    stats = counted(tmp_path, [greedy(0, body="lone"), greedy(1), greedy(2),
                               greedy(3, content="other")])
    assert stats.seqs_with(Verdict.DIVERGENT) == [3]


def test_only_the_loaded_phases_are_compared(tmp_path: Path) -> None:
    # Priming and measurement replies are twins of each other; the reference phase's solo
    # replies and replies of other phases are not judged divergent.
    records = [greedy(0, phase="priming"), greedy(1), greedy(2, phase="priming",
                                                            content="other"),
               greedy(3, phase="reference", content="solo"),
               greedy(4, phase="warmup", content="x")]
    stats = counted(tmp_path, records)
    assert stats.seqs_with(Verdict.DIVERGENT) == [2]
    nameless = greedy(5, content="y")
    del nameless["phase"]  # a line without a phase is a measured one
    stats = counted(tmp_path / "b", [*records[:2], nameless])
    assert stats.seqs_with(Verdict.DIVERGENT) == [5]


def test_what_twins_must_agree_on_is_the_visible_answer() -> None:
    base = greedy(0, content="done")
    assert answer_key_of(base) == answer_key_of({**base, "reasoning": "other thoughts"})
    for change in ({"finish_reason": "length"}, {"content": "done!"},
                   {"tool_calls": []},
                   {"tool_calls": [{"function": {**CALL[0]["function"], "name": "cancel"}}]},
                   {"tool_calls": [{"function": {**CALL[0]["function"], "arguments": "{}"}}]}):
        assert answer_key_of({**base, **change}) != answer_key_of(base), change
    # Entries that are no call are left out; a `function` that is no object is a call
    # with neither name nor arguments; a missing content is an empty one.
    assert answer_key_of({**base, "tool_calls": ["junk", *CALL]}) == answer_key_of(base)
    assert answer_key_of({**base, "tool_calls": [{"function": "x"}]}) == \
        answer_key_of({**base, "tool_calls": [{}]}) != answer_key_of({**base, "tool_calls": []})
    assert answer_key_of({**base, "content": None}) == answer_key_of({**base, "content": ""})
    for text in ("XXXX", " ", "0"):  # any text at all is not an empty answer
        assert answer_key_of({**base, "content": text}) != answer_key_of({**base, "content": None})
    assert answer_key_of({"finish_reason": "stop"}) == answer_key_of(
        {"finish_reason": "stop", "content": "", "tool_calls": []})


def test_a_greedy_line_without_a_seq_is_judged_as_its_own_record(tmp_path: Path) -> None:
    lost = greedy(9, content="other")
    del lost["seq"]
    stats = counted(tmp_path, [greedy(0), greedy(1), greedy(2), lost])
    assert final(stats) == {-1: ["divergent"]}


# ---------------------------------------------------------------- run_level.jsonl

def test_run_level_jsonl_holds_one_line_per_changed_record(tmp_path: Path) -> None:
    # What `dsv4-qual report DIR` writes beside records.jsonl: the changed records only.
    same = dict(finish_reason="stop", content="yes")
    records = [greedy(3, **same), greedy(1, **same), greedy(2, **{**same, "content": "no"}),
               greedy(0, **{**same, "content": "maybe"})]
    stats = counted(tmp_path, records)
    write_run_level(tmp_path / RUN_LEVEL_FILE, stats.changed)
    lines = [orjson.loads(x) for x in (tmp_path / RUN_LEVEL_FILE).read_bytes().splitlines()]
    # In seq order, whatever order they were found in.
    assert lines == [
        {"seq": 0, "phase": "measurement", "item_id": "i0", "verdicts": ["divergent"],
         "run_level": ["divergent"], "replaced": [], "findings": {}},
        {"seq": 2, "phase": "measurement", "item_id": "i2", "verdicts": ["divergent"],
         "run_level": ["divergent"], "replaced": [], "findings": {}},
    ]
    assert {seq: line.model_dump() for seq, line in read_run_level(
        tmp_path / RUN_LEVEL_FILE).items()} == {0: lines[0], 2: lines[1]}


def test_run_level_jsonl_is_rewritten_whole_and_empty_when_nothing_changed(
        tmp_path: Path) -> None:
    path = tmp_path / RUN_LEVEL_FILE
    path.write_text('{"seq": 0, "verdicts": ["divergent"]}\n')
    write_run_level(path, counted(tmp_path, [greedy(0), greedy(1)]).changed)
    assert path.read_bytes() == b""
    assert read_run_level(path) == {}


def test_a_reader_skips_lines_it_cannot_use(tmp_path: Path) -> None:
    path = tmp_path / RUN_LEVEL_FILE
    assert read_run_level(path) == {}  # no file: no record was changed
    path.write_bytes(b'{"seq": 4, "verdicts": ["cross_talk"]}\n'
                     b'{"seq": 5, "verdicts": ["divergent"]\n'  # torn
                     b'["seq", 6]\n'
                     b'{"seq": "7", "verdicts": ["divergent"]}\n'
                     b'{"verdicts": ["divergent"]}\n'
                     b'{"seq": 8, "verdicts": ["reference_mismatch"]}\n')
    # A line an older writer cut short reads with the rest as their defaults.
    assert {seq: line.model_dump(exclude_unset=True) for seq, line in read_run_level(
        path).items()} == {4: {"seq": 4, "verdicts": ["cross_talk"]},
                           8: {"seq": 8, "verdicts": ["reference_mismatch"]}}
    assert read_run_level(path)[4].phase == ""
    assert read_run_level(path)[4].findings == {}
