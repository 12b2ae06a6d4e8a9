"""A results directory judged: what the gate is given (the scenario's fail_on, its
run-level rules, the priming and reference phases, the counts over every phase), and each
phase's figures as summary.json states them."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.exit_codes import BadInputError
from loadgen.judge.gate.aggregate import PhaseStats
from loadgen.judge.gate.gate import NO_REPLY, NOTHING_MEASURED
from loadgen.judge.gate.run_report import judge_run, phase_summary
from loadgen.results import RunFacts
from loadgen.scenario import Scenario
from loadgen.taxonomy import Verdict
from tests.support.reports import judged, record


def scenario(**fields: object) -> Scenario:
    return Scenario.model_validate({"name": "s", **fields})


def checks(report) -> dict[str, tuple[bool, str]]:  # type: ignore[no-untyped-def]
    return {c.name: (c.passed, c.message) for c in report.gate.checks}


def test_a_directory_that_is_no_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInputError) as refused:
        judge_run(tmp_path)
    assert str(refused.value) == (f"{tmp_path}: no run.json or records.jsonl: not a "
                                  "dsv4-qual results directory")


def test_the_gate_counts_what_the_scenario_fails_on(tmp_path: Path) -> None:
    records = [record(i) for i in range(6)] + [record(6, verdicts=["truncated"])]
    # Every failure verdict gates unless the scenario ignores it by name.
    strict = judged(tmp_path / "a", records, scenario=scenario(gate={"prove_below": 0.9}))
    assert (strict.gate.failures, strict.gate.exit_code) == (1, 1)
    lenient = judged(tmp_path / "b", records,
                     scenario=scenario(gate={"ignore": ["truncated"], "prove_below": 0.9}))
    assert (lenient.gate.failures, lenient.gate.exit_code) == (0, 0)
    assert lenient.gate.not_gated == {"truncated": 1}
    assert "Detected but not gated: truncated 1 (ignored by gate.ignore)." \
        in lenient.gate.statement
    # A scenario that lists fail_on as it stood before a verdict existed still gates it.
    old = judged(tmp_path / "c", records,
                 scenario=scenario(gate={"fail_on": ["stuck_in_reasoning"], "prove_below": 0.9}))
    assert (old.gate.failures, old.gate.exit_code) == (1, 1)


def test_the_run_level_rules_of_the_scenario_are_applied(tmp_path: Path) -> None:
    same = dict(greedy=True, body_hash="h", finish_reason="stop", content="yes")
    records = [record(0, **same), record(1, **same), record(2, **{**same, "content": "no"})]
    gated = judged(tmp_path / "a", records,
                   scenario=scenario(gate={"fail_on": ["divergent"], "prove_below": 0.9}))
    assert gated.gate.failures == 1 and gated.stats.seqs_with(Verdict.DIVERGENT) == [2]
    assert gated.phase_summaries["measurement"].run_level_verdicts == ["divergent"]
    assert gated.measurement is gated.stats.phases["measurement"]


def test_the_priming_the_scenario_planned_is_checked_against_the_priming_replies(
        tmp_path: Path) -> None:
    records = [record(0, phase="priming"), record(1, phase="priming"),
               record(2, phase="priming", verdicts=["http_error"])]
    records += [record(i) for i in range(3, 8)]
    report = judged(tmp_path, records, scenario=scenario(load={"priming": 3}))
    passed, detail = checks(report)["priming reached the model (infrastructure errors <= 0)"]
    assert not passed and detail.startswith("2 of 3 priming requests answered by the model, "
                                            "1 http_error/timeout/stream_error")


def test_spec_decode_acceptance_is_read_from_the_server_document(tmp_path: Path) -> None:
    def marks(drafted: int, accepted: int) -> dict[str, dict[str, float]]:
        return {"start": {"spec_draft_tokens": 0.0, "spec_accepted_tokens": 0.0},
                "end": {"spec_draft_tokens": float(drafted),
                        "spec_accepted_tokens": float(accepted)}}

    server = {"servers": {"http://127.0.0.1:1": {"phase_marks": {
        "reference": marks(100, 80), "measurement": marks(100, 20)}}}}
    report = judged(tmp_path, [record(i) for i in range(4)],
                    scenario=scenario(reference={"requests": 1}), server=server)
    passed, detail = checks(report)["spec-decode acceptance under load >= 0.5 x alone"]
    assert not passed and detail.startswith("acceptance 0.200 under load, 0.800 alone")


def test_requests_of_every_phase_count_as_sent_and_answered(tmp_path: Path) -> None:
    # The priming phase was sent and answered, the measurement never began: nothing was
    # measured (not "nothing sent").
    primed = judged(tmp_path / "a", [record(0, phase="priming"), record(1, phase="priming")])
    assert primed.gate.no_rate == NOTHING_MEASURED
    # Every request of every phase failed on the way: no reply came at all.
    refused = [record(0, phase="priming", verdicts=["http_error"]),
               record(1, verdicts=["http_error"])]
    facts = RunFacts(run_id="r", scenario="s", base_urls=["http://127.0.0.1:1"],
                     ready=["http://127.0.0.1:1"])
    assert judged(tmp_path / "b", refused, facts=facts).gate.no_rate == NO_REPLY


# ------------------------------------------------------------ a phase's figures

def test_a_phase_summary_states_rates_of_the_measured_and_throughput() -> None:
    st = PhaseStats(requests=5, interrupted=1, infra_errors=1, first_sent=100.0,
                    last_end=104.0, completion_tokens=[10, 30], reasoning_tokens=7,
                    prompt_tokens=50, failing_seqs={3, 4})
    st.verdicts.update({"ok": 2, "stuck_in_reasoning": 2, "divergent": 1, "cross_talk": 0})
    st.primary.update({"stuck_in_reasoning": 2, "ok": 3})
    st.finish_reasons.update({"stop": 3, "length": 2})
    summary = phase_summary(st).to_dict()
    assert summary["requests"] == 5 and summary["measured"] == 4
    assert list(summary["verdicts"]) == ["cross_talk", "divergent", "ok", "stuck_in_reasoning"]
    assert summary["run_level_verdicts"] == ["divergent"]
    assert summary["primary_verdicts"] == {"ok": 3, "stuck_in_reasoning": 2}
    assert list(summary["primary_verdicts"]) == ["ok", "stuck_in_reasoning"]
    assert summary["rates"] == {"cross_talk": 0.0, "divergent": 0.25, "ok": 0.5,
                                "stuck_in_reasoning": 0.5}
    assert list(summary["finish_reasons"]) == ["length", "stop"]
    assert (summary["infra_errors"], summary["interrupted"], summary["failed"]) == (1, 1, 2)
    assert summary["tokens"]["completion"] == 40
    assert (summary["tokens"]["reasoning"], summary["tokens"]["prompt"]) == (7, 50)
    assert summary["tokens"]["completion_per_request"]["max"] == 30.0
    assert summary["wall_s"] == 4.0
    assert (summary["tokens_per_s"], summary["requests_per_s"]) == (10.0, 1.25)
    assert set(summary["latency_s"]) == {"ttft", "inter_token", "e2e"}


def test_a_phase_without_time_or_measured_replies_has_no_rate() -> None:
    st = PhaseStats(requests=2, interrupted=2)
    st.verdicts.update({"interrupted": 2})
    summary = phase_summary(st).to_dict()
    assert summary["rates"] == {"interrupted": None}
    assert (summary["wall_s"], summary["tokens_per_s"], summary["requests_per_s"]) == \
        (None, None, None)
    # A phase of one instant: no throughput either (not a division by zero).
    instant = PhaseStats(requests=1, first_sent=5.0, last_end=5.0, completion_tokens=[3])
    assert phase_summary(instant).to_dict()["tokens_per_s"] is None
    assert phase_summary(instant).to_dict()["requests_per_s"] is None


def test_a_judged_run_carries_what_it_was_read_from(tmp_path: Path) -> None:
    # Every report (the headline, the server table, the verdict) reads these.
    server = {"servers": {"http://127.0.0.1:1": {"version": {"version": "0.28.0"}}}}
    report = judged(tmp_path, [record(0)], scenario=scenario(gate={"role": "control"}),
                    server=server)
    assert report.out_dir == tmp_path
    assert (report.scenario.name, report.scenario.gate.role) == ("s", "control")
    assert (report.run.run_id, report.run.model) == ("r", "m")
    assert report.server.versions == ["0.28.0"]
    assert report.stats.records == 1 and report.gate.role == "control"
