"""What a statement says a run covered: answers checked exactly and their bound, the
prefix cache the workload asked to reuse, transport retries; and `require_prefix_reuse`,
which makes a run that cannot show a cache hit invalid."""

from __future__ import annotations

import pytest

from loadgen.expectations import AnswerCheck, Expectation
from loadgen.judge.gate.aggregate import PhaseStats
from loadgen.judge.gate.gate import GateContext
from loadgen.records import RequestRecord
from loadgen.scenario import GateConfig
from loadgen.targets.telemetry_summary import PrefixReuse, prefix_reuse
from tests.loadgen.judge.gate.test_gate_mutants import gate

EXP = Expectation(facts={"code": "QK7T2ZP4"}, checks=(AnswerCheck("code"),)).to_dict()


def measured(total: int, checkable: int, failed: int, retried: int = 0) -> PhaseStats:
    """`total` replies, the first `checkable` with a known answer, the first `failed` of
    those wrong."""
    st = PhaseStats()
    for seq in range(total):
        wrong = seq < failed
        verdicts = ["wrong_answer"] if wrong else ["ok"]
        rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=seq,
                            endpoint="http://x", item_id=f"i{seq}", finish_reason="stop",
                            expected=EXP if seq < checkable else None,
                            transport_retry="ReadError: reset" if seq < retried else None)
        st.add(rec, verdicts, wrong)
    return st


@pytest.mark.parametrize("total,checkable,failed", [(64, 64, 0), (100, 60, 0), (100, 60, 3)])
def test_the_statement_says_how_many_answers_were_checked_and_bounds_them(
        total: int, checkable: int, failed: int) -> None:
    result = gate(GateConfig(prove_below=0.2, allowed=failed), measured(total, checkable,
                                                                        failed))
    answers = result.answers
    assert answers is not None
    assert (answers.checked, answers.failed, answers.wrong) == (checkable, failed, failed)
    assert f"{checkable} of {total} measured replies had an answer checked exactly" \
        in result.statement
    assert f"{failed} of them failed" in result.statement
    assert answers.upper_bound_95 is not None and answers.upper_bound_95 > failed / checkable


def test_a_run_without_a_checkable_answer_says_what_its_clean_rests_on() -> None:
    result = gate(GateConfig(), measured(64, 0, 0))
    assert "rests on the detectors of failure shapes alone" in result.statement
    assert result.answers is not None and result.answers.checked == 0


def test_transport_retries_are_counted_and_no_failure() -> None:
    result = gate(GateConfig(), measured(64, 64, 0, retried=2))
    assert result.exit_code == 0
    assert "2 measured request(s) were sent again after a kept connection" in result.statement


@pytest.mark.parametrize("reuse,code,said", [
    (None, 2, "exports no prefix-cache counters"),
    (PrefixReuse(queries=50_000, hits=0), 2, "not exercised"),
    (PrefixReuse(queries=50_000, hits=30_000), 0, "served 60% of the 50,000 prompt tokens"),
])
def test_required_prefix_reuse_must_be_shown(reuse: PrefixReuse | None, code: int,
                                             said: str) -> None:
    context = GateContext(prefix_cache={"measurement": reuse} if reuse else {},
                          asks_reuse=True)
    result = gate(GateConfig(require_prefix_reuse=True), measured(64, 64, 0), context=context)
    assert result.exit_code == code
    assert said in result.statement or any(said in r for r in result.reasons)


def test_reuse_not_required_is_only_said() -> None:
    context = GateContext(prefix_cache={"measurement": PrefixReuse(1000, 0)}, asks_reuse=True)
    result = gate(GateConfig(), measured(64, 64, 0), context=context)
    assert result.exit_code == 0 and "were not exercised" in result.statement
    quiet = gate(GateConfig(), measured(64, 64, 0), context=GateContext())
    assert "prefix" not in quiet.statement  # a workload that shares nothing: nothing said


def test_the_prefix_cache_per_phase_comes_from_the_phase_marks() -> None:
    def mark(t: float, queries: float, hits: float) -> dict:
        return {"t": t, "prefix_cache_queries": queries, "prefix_cache_hits": hits}

    doc = {"servers": {
        "http://a": {"phase_marks": {"measurement": {"start": mark(1, 100, 10),
                                                     "end": mark(9, 1100, 610)}}},
        "http://b": {"phase_marks": {"measurement": {"start": mark(1, 0, 0),
                                                     "end": mark(9, 500, 0)}}},
        "http://c": {"phase_marks": {"measurement": {"start": {"t": 1}, "end": {"t": 9}}}}},
        "samples": [{"t": 5, "server": "http://a", **mark(5, 50, 5)}]}  # a restart between
    reuse = prefix_reuse(doc)["measurement"]
    # a: reset to 50 (counted from zero: +50), then +1050; b: +500; c counts nothing.
    assert (reuse.queries, reuse.hits) == (50 + 1050 + 500, 5 + 605)
