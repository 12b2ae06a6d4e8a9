"""The counting pass over records.jsonl: every figure of a phase as summary.json states it,
the forensic tails report.md shows, the timeline the plots and the spread test read, and
how a record a run-level rule revised is counted (in place of its own verdicts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadgen.judge.gate.aggregate import (
    FORENSIC_FAILURES,
    TimelinePoint,
    aggregate,
    failure_rate_by_in_flight,
    failure_rate_by_order,
    percentiles,
)
from loadgen.judge.gate.run_report import phase_summary
from loadgen.scenario import Scenario
from loadgen.taxonomy import Verdict
from tests.loadgen.judge.run_level.test_cross_talk import expectation
from tests.support.raw_records import FAIL_ON, counted, write_records

T0 = 1_700_000_000.0


def rec(seq: int, verdicts: list[str] | None = None, *, phase: str = "measurement",
        sent: float | None = None, end: float | None = 1.0, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"seq": seq, "phase": phase, "item_id": f"i{seq}",
                         "verdicts": verdicts or ["ok"], "finish_reason": "stop",
                         "timings": {"sent": T0 + seq if sent is None else sent, "end": end}}
    d.update(extra)
    return d


def twin(seq: int, answer: str = "A", **extra: Any) -> dict[str, Any]:
    """A greedy reply to body h: twins that answer otherwise are divergent."""
    return rec(seq, greedy=True, body_hash="h", content=answer, **extra)


# ------------------------------------------------------------ a phase's figures

def test_a_phase_states_every_figure_of_its_replies(tmp_path: Path) -> None:
    records = [
        rec(0, sent=T0 + 1, end=2.0, finish_reason="tool_calls", in_flight=3,
            timings={"sent": T0 + 1, "end": 2.0, "first_reasoning": 0.3,
                     "first_content": 0.5, "gap_mean": 0.01},
            usage={"completion_tokens": 50, "reasoning_tokens": 20, "prompt_tokens": 100}),
        rec(1, timings={"sent": T0, "end": 1.5, "first_content": 0.2, "gap_mean": 0.02},
            usage={"completion_tokens": 30, "prompt_tokens": 90}),
        rec(2, ["stuck_in_reasoning", "reasoning_loop"], finish_reason="length",
            timings={"sent": T0 + 2, "end": 9.0, "first_reasoning": 0.4},
            usage={"completion_tokens": 400, "reasoning_tokens": 400, "prompt_tokens": 80}),
        rec(3, ["http_error"], finish_reason=None, error="HTTP 500: boom",
            timings={"sent": T0 + 3, "end": 0.1}, usage={}),
        rec(4, ["timeout"], finish_reason=None, timings={"sent": T0 + 4, "end": 30.0}),
        rec(5, ["interrupted"], finish_reason="", timings={"sent": T0 + 5}),
        rec(6, ["interrupted"], timings={"sent": T0 + 6, "end": 1.0},
            usage={"completion_tokens": 7}),
    ]
    stats = counted(tmp_path, records)
    assert stats.records == 7 and list(stats.phases) == ["measurement"]
    summary = phase_summary(stats.phases["measurement"]).to_dict()
    assert summary["requests"] == 7 and summary["measured"] == 5
    assert summary["verdicts"] == {"http_error": 1, "interrupted": 2, "ok": 2,
                                   "reasoning_loop": 1, "stuck_in_reasoning": 1, "timeout": 1}
    assert summary["primary_verdicts"] == {"http_error": 1, "interrupted": 2, "ok": 2,
                                           "stuck_in_reasoning": 1, "timeout": 1}
    assert summary["finish_reasons"] == {"length": 1, "stop": 2, "tool_calls": 1}  # "" is none
    assert (summary["infra_errors"], summary["interrupted"], summary["failed"]) == (2, 2, 1)
    lat = summary["latency_s"]
    # The first token is the earlier of the first reasoning and the first content.
    assert lat["ttft"] == percentiles([0.3, 0.2, 0.4])
    assert lat["inter_token"] == percentiles([0.01, 0.02])
    # End to end: replies that came (not the infrastructure errors, not the interrupted).
    assert lat["e2e"] == percentiles([2.0, 1.5, 9.0])
    assert summary["tokens"]["completion"] == 487
    assert summary["tokens"]["completion_per_request"] == percentiles([50.0, 30.0, 400.0, 7.0])
    assert (summary["tokens"]["reasoning"], summary["tokens"]["prompt"]) == (420, 270)
    # From the first sent (seq 1, at T0) to the last end (seq 4, T0 + 4 + 30).
    assert summary["wall_s"] == pytest.approx(34.0)
    assert stats.run_start == T0


def test_the_timeline_is_in_completion_order_with_times_from_the_run_start(
        tmp_path: Path) -> None:
    records = [rec(5, ["stuck_in_reasoning"], phase="priming", sent=T0 + 2.0, in_flight=4),
               rec(3, sent=T0 + 0.5, in_flight=2),
               rec(4, ["truncated"], sent=T0 + 1.0),  # no in_flight: 0
               rec(9, sent=T0 + 9.0, timings={"end": 1.0})]  # never sent: at the epoch
    # A gate that ignores `truncated`: the point is shown, not failed.
    stats = counted(tmp_path, records, fail_on=[v for v in FAIL_ON if v != "truncated"])
    assert stats.phases["measurement"].timeline == [
        TimelinePoint(3, "ok", 2, 0.0, False),
        TimelinePoint(4, "truncated", 0, 0.5, False),
        TimelinePoint(9, "ok", 0, -T0 - 0.5, False),
    ]
    assert stats.phases["priming"].timeline == [TimelinePoint(5, "stuck_in_reasoning", 4,
                                                              1.5, True)]
    # The run's timeline is every phase's, in request order.
    assert [p.seq for p in stats.timeline()] == [3, 4, 5, 9]
    assert stats.run_start == T0 + 0.5


def test_lines_without_phase_seq_or_item_are_counted(tmp_path: Path) -> None:
    bare = {"verdicts": ["stuck_in_reasoning"], "content": "...", "reasoning": "x"}
    stats = counted(tmp_path, [bare, {**bare, "phase": ""}, rec(1)])
    (phase,) = stats.phases
    assert phase == "measurement" and stats.phases[phase].requests == 3
    assert [p.seq for p in stats.phases[phase].timeline] == [-1, -1, 1]
    assert [t.seq for t in stats.phases[phase].failures] == [-1, -1]
    assert stats.run_start == T0 + 1


def test_figures_a_line_states_in_another_type_are_left_out_not_a_stop(
        tmp_path: Path) -> None:
    """A line another writer (or a hand edit) typed otherwise is still a request: it is
    counted, and only the figures that are numbers are used."""
    odd = rec(2, ["stuck_in_reasoning"], sent="soon", end=True,
              usage={"completion_tokens": "12", "reasoning_tokens": None, "prompt_tokens": 7,
                     "cached": 3},
              extra_key={"kept": "out"})
    odd["timings"].update(first_reasoning=False, first_content="x", gap_mean=None)
    stats = counted(tmp_path, [rec(1, end=2.0), odd])
    st = stats.phases["measurement"]
    assert (st.requests, st.e2e, st.ttft, st.gap_mean) == (2, [2.0], [], [])
    assert (st.completion_tokens, st.reasoning_tokens, st.prompt_tokens) == ([], 0, 7)
    assert (st.first_sent, st.last_end) == (T0 + 1, T0 + 3.0)
    assert [t.seq for t in st.failures] == [2] and st.failing_seqs == {2}


def test_a_run_without_records_has_nothing_to_count(tmp_path: Path) -> None:
    stats = aggregate(tmp_path, FAIL_ON)
    assert (stats.phases, stats.records, stats.run_start, stats.changed,
            stats.rule_summaries) == ({}, 0, None, [], {})
    # An empty file: no phase, no start.
    stats = counted(tmp_path / "e", [])
    assert (stats.phases, stats.records, stats.run_start) == ({}, 0, None)


# -------------------------------------------------------------- forensic tails

def test_a_forensic_tail_keeps_what_a_bug_report_needs(tmp_path: Path) -> None:
    calls = [{"function": {"name": "change_plan", "arguments": "{}"}}]
    failed = rec(0, ["stuck_in_reasoning"], finish_reason="length", error="gave up",
                 reasoning="r" * 100 + "L" * 600, content="c" * 600, tool_calls=calls,
                 usage={"completion_tokens": 4096}, findings={"stuck": "no answer"})
    (tail,) = counted(tmp_path, [failed]).phases["measurement"].failures
    assert (tail.seq, tail.verdicts, tail.finish_reason, tail.completion_tokens, tail.error) \
        == (0, ["stuck_in_reasoning"], "length", 4096, "gave up")
    # The last 600 characters of each text.
    assert tail.reasoning_tail == "L" * 600 and tail.content_tail == "c" * 600
    assert tail.tool_calls == calls and tail.findings == {"stuck": "no answer"}


def test_a_tail_of_a_reply_with_little_in_it_is_empty_not_made_up(tmp_path: Path) -> None:
    (tail,) = counted(tmp_path, [rec(0, ["empty_content"], finish_reason=None)]
                      ).phases["measurement"].failures
    assert (tail.finish_reason, tail.completion_tokens, tail.error, tail.reasoning_tail,
            tail.content_tail, tail.tool_calls, tail.findings) == (None, None, None, "", "",
                                                                   [], {})


def test_tails_are_kept_for_the_first_ten_replies_worth_a_look(tmp_path: Path) -> None:
    # Failed, or carrying a verdict other than ok: an infrastructure error is worth a
    # look, an ok or an interrupted reply is not.
    records = [rec(0), rec(1, ["interrupted"]), rec(2, ["http_error"]), rec(3, ["truncated"])]
    records += [rec(10 + i, ["garbled"]) for i in range(12)]
    tails = counted(tmp_path, records).phases["measurement"].failures
    assert len(tails) == FORENSIC_FAILURES == 10
    assert [t.seq for t in tails] == [2, 3, *range(10, 18)]
    # A reply failed by the gate is worth a look even with an ok first.
    stats = counted(tmp_path / "b", [rec(0, ["ok", "truncated"])], fail_on=["truncated"])
    assert [t.seq for t in stats.phases["measurement"].failures] == [0]


# ----------------------------------------------------------------- percentiles

def test_percentiles_take_the_nearest_rank() -> None:
    assert percentiles(list(range(100, 0, -1))) == {"p50": 50, "p90": 90, "p99": 99,
                                                    "max": 100, "mean": 50.5}
    ten = [float(x) for x in range(1, 11)]
    assert percentiles(ten) == {"p50": 5.0, "p90": 9.0, "p99": 10.0, "max": 10.0, "mean": 5.5}
    assert percentiles([2.0, 1.0]) == {"p50": 1.0, "p90": 2.0, "p99": 2.0, "max": 2.0,
                                       "mean": 1.5}
    assert percentiles([3.0]) == {"p50": 3.0, "p90": 3.0, "p99": 3.0, "max": 3.0, "mean": 3.0}
    assert percentiles([]) == {"p50": None, "p90": None, "p99": None, "max": None,
                               "mean": None}


# ------------------------------------------------------------- the order plots

def points(failed: list[bool], in_flight: list[int] | None = None) -> list[TimelinePoint]:
    flights = in_flight or [1] * len(failed)
    return [TimelinePoint(100 + i, "x", flights[i], float(i), f)
            for i, f in enumerate(failed)]


def test_failure_rate_by_order_is_per_bucket_of_consecutive_requests() -> None:
    # 20 requests: buckets of 8 (the smallest), the last one short.
    bucket, xs, ys = failure_rate_by_order(points([False] * 8 + [True] * 4 + [False] * 8))
    assert (bucket, xs, ys) == (8, [100, 108, 116], [0.0, 50.0, 0.0])
    # 320 requests: 16 buckets of 20.
    bucket, xs, ys = failure_rate_by_order(points([i % 20 == 0 for i in range(320)]))
    assert bucket == 20 and len(xs) == 16 and xs[1] == 120 and ys == [5.0] * 16
    assert failure_rate_by_order(points([True] * 287))[0] == 17
    assert failure_rate_by_order([]) == (8, [], [])


def test_failure_rate_by_in_flight_is_per_number_in_flight() -> None:
    keys, rates = failure_rate_by_in_flight(points([True, False, False, True, True],
                                                   [4, 4, 1, 4, 2]))
    assert keys == [1, 2, 4] and rates == [0.0, 100.0, pytest.approx(200 / 3)]


# ----------------------------------------------------- records a rule revised

def test_a_revised_record_is_counted_with_its_final_verdicts(tmp_path: Path) -> None:
    # The divergent twin is failed when the scenario gates divergent.
    records = [twin(0), twin(1), twin(2, "B")]
    stats = counted(tmp_path, records, fail_on=[*FAIL_ON, "divergent"])
    st = stats.phases["measurement"]
    assert dict(st.verdicts) == {"ok": 2, "divergent": 1}
    assert dict(st.primary) == {"ok": 2, "divergent": 1}
    assert st.failing_seqs == {2}
    assert st.timeline[2] == TimelinePoint(2, "divergent", 0, 2.0, True)
    (tail,) = st.failures
    assert (tail.seq, tail.verdicts, tail.findings) == (2, ["divergent"], {})
    (changed,) = stats.changed
    assert (changed.seq, changed.phase, changed.item_id, changed.verdicts, changed.run_level,
            changed.replaced, changed.findings) == (2, "measurement", "i2", ["divergent"],
                                                    ["divergent"], [], {})
    assert stats.seqs_with(Verdict.DIVERGENT) == [2]
    assert stats.seqs_with(Verdict.CROSS_TALK) == []


def test_a_verdict_no_record_keeps_is_not_counted_at_zero(tmp_path: Path) -> None:
    # The only measured reply is the divergent one: no "ok 0" is left behind.
    records = [twin(0, phase="priming"), twin(1, phase="priming"), twin(2, "B")]
    st = counted(tmp_path, records).phases["measurement"]
    assert dict(st.verdicts) == {"divergent": 1} and dict(st.primary) == {"divergent": 1}
    assert phase_summary(st).to_dict()["verdicts"] == {"divergent": 1}


WRONG = [{"field": "call 0 change_plan.account_id", "fact": "account_id",
          "expected": "AAAA11", "got": "BBBB22"}]


def cross_talk_run() -> list[dict[str, Any]]:
    """seq 0 acts on seq 1's account: its wrong answer is cross-talk."""
    args = '{"account_id": "BBBB22", "plan": "business"}'
    calls = [{"function": {"name": "change_plan", "arguments": args}}]
    return [rec(0, ["wrong_answer"], expected=expectation("AAAA11"), tool_calls=calls,
                findings={"wrong_answer": WRONG, "stuck": "also slow"}, content="moved"),
            rec(1, expected=expectation("BBBB22"), tool_calls=calls)]


def test_a_record_no_longer_failed_once_revised_leaves_the_failures(tmp_path: Path) -> None:
    # Gated on wrong answers only: the wrong answer another request explains is
    # cross_talk, which this scenario does not gate.
    stats = counted(tmp_path, cross_talk_run(), fail_on=["wrong_answer"])
    st = stats.phases["measurement"]
    assert st.failing_seqs == set() and phase_summary(st).to_dict()["failed"] == 0
    assert st.timeline[0].verdict == "cross_talk" and st.timeline[0].failed is False
    (tail,) = st.failures  # it was a failure when counted: its tail says what it became
    assert tail.verdicts == ["cross_talk"]
    assert tail.findings["stuck"] == "also slow" and tail.findings["wrong_answer"] == WRONG
    assert tail.findings["cross_talk"]["sources"][0]["source_seq"] == 1
    (changed,) = stats.changed
    assert (changed.verdicts, changed.run_level, changed.replaced) == \
        (["cross_talk"], ["cross_talk"], ["wrong_answer"])


def test_only_verdicts_the_record_had_are_listed_as_replaced(tmp_path: Path) -> None:
    # Its findings name a wrong field, but its verdicts (another version's) do not.
    records = cross_talk_run()
    records[0]["verdicts"] = ["ok"]
    (changed,) = counted(tmp_path, records).changed
    assert (changed.verdicts, changed.replaced) == (["cross_talk"], [])


def test_a_revised_record_without_a_tail_gets_one_per_run_level_verdict(
        tmp_path: Path) -> None:
    # Ten failures fill the tails first; the divergent and cross-talk replies (ok when
    # counted) still get one example each, read again from the file, in seq order.
    records = [rec(i, ["garbled"], sent=T0 + i) for i in range(20, 30)]
    records += [twin(0), twin(1), twin(2, "B", reasoning="thought"), twin(3, "C")]
    ct = cross_talk_run()
    records += [{**ct[0], "seq": 40, "verdicts": ["ok"]}, {**ct[1], "seq": 41}]
    records.append(twin(5, "D", phase="priming"))
    records += [twin(6, phase="priming"), twin(7, phase="priming")]
    stats = counted(tmp_path, records)
    st = stats.phases["measurement"]
    assert [t.seq for t in st.failures] == [2, *range(20, 30), 40]
    two = st.failures[0]
    assert (two.verdicts, two.reasoning_tail, two.content_tail) == (["divergent"],
                                                                   "thought", "B")
    forty = st.failures[-1]
    assert forty.verdicts == ["cross_talk"] and "cross_talk" in forty.findings
    assert forty.findings["stuck"] == "also slow"
    # The priming phase's divergent reply is that phase's example.
    assert [t.seq for t in stats.phases["priming"].failures] == [5]


def test_a_revised_record_that_already_has_a_tail_is_not_shown_twice(tmp_path: Path) -> None:
    records = [twin(0), twin(1), twin(2, "B", verdicts=["truncated"])]
    st = counted(tmp_path, records).phases["measurement"]
    assert [(t.seq, t.verdicts) for t in st.failures] == [(2, ["truncated", "divergent"])]


def test_a_tail_is_added_only_for_a_verdict_none_shows_yet(tmp_path: Path) -> None:
    # seq 2 is divergent and has a tail already; seq 3's divergence adds no second example.
    records = [twin(0), twin(1), twin(4), twin(2, "B", verdicts=["truncated"]), twin(3, "C")]
    st = counted(tmp_path, records).phases["measurement"]
    assert [t.seq for t in st.failures] == [2]


def test_each_rule_summary_is_kept_by_its_name(tmp_path: Path) -> None:
    scenario = Scenario.model_validate({"name": "s", "reference": {"requests": 1}})
    stats = counted(tmp_path, [rec(0)], scenario=scenario)
    assert list(stats.rule_summaries) == ["reference"]
    assert stats.reference is not None and stats.reference.solo_replies == 0
    assert counted(tmp_path / "b", [rec(0)]).rule_summaries == {}


def test_without_rules_nothing_is_revised(tmp_path: Path) -> None:
    stats = aggregate(write_records(tmp_path, [twin(0), twin(1), twin(2, "B")]), FAIL_ON)
    assert stats.changed == [] and dict(stats.phases["measurement"].verdicts) == {"ok": 3}


def test_each_run_level_verdict_gets_its_example_after_ten_failures(tmp_path: Path) -> None:
    # Ten failures fill the first tails; divergent, cross_talk and reference_mismatch
    # still get one example each (three more tails, not two).
    records = [rec(i, ["garbled"], sent=T0 + i) for i in range(20, 30)]
    records += [twin(0), twin(1), twin(2, "B")]
    ct = cross_talk_run()
    records += [{**ct[0], "seq": 40, "verdicts": ["ok"]}, {**ct[1], "seq": 41}]
    solo = rec(50, phase="reference", body_hash="ref", content="Q1RST1")
    records += [solo, rec(51, body_hash="ref", content="Q9RST9")]
    scenario = Scenario.model_validate({"name": "s", "reference": {"requests": 1}})
    st = counted(tmp_path, records, scenario=scenario).phases["measurement"]
    assert [(t.seq, t.verdicts[0]) for t in st.failures if t.seq not in range(20, 30)] == \
        [(2, "divergent"), (40, "cross_talk"), (51, "reference_mismatch")]


def test_revised_twins_are_each_counted(tmp_path: Path) -> None:
    st = counted(tmp_path, [twin(0), twin(1), twin(2), twin(3, "B"), twin(4, "C")]
                 ).phases["measurement"]
    assert dict(st.primary) == {"ok": 3, "divergent": 2}
    assert dict(st.verdicts) == {"ok": 3, "divergent": 2}


def test_a_revised_line_without_seq_or_item_gets_its_tail(tmp_path: Path) -> None:
    lost = twin(9, "B", reasoning="lost")
    del lost["seq"], lost["item_id"]
    stats = counted(tmp_path, [twin(0), twin(1), twin(2), lost])
    (changed,) = stats.changed
    assert (changed.seq, changed.item_id, changed.verdicts) == (-1, "", ["divergent"])
    (tail,) = stats.phases["measurement"].failures
    assert (tail.seq, tail.verdicts, tail.reasoning_tail) == (-1, ["divergent"], "lost")
