"""What the gate promises, at the edges mutation testing found unpinned.

Each test holds a rule a user depends on (an exit code, a check's reason, a sentence of
the statement) where a one-token change to `loadgen/judge/gate/gate.py` went unnoticed by the
other tests (`benchmarks/mutation.py`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from loadgen.judge.gate import gate as gate_mod
from loadgen.judge.gate.aggregate import PhaseStats, TimelinePoint
from loadgen.judge.gate.checks import CheckKind
from loadgen.judge.gate.gate import GateContext, GateResult
from loadgen.judge.run_level.reference import ReferenceSummary
from loadgen.load_claim import LoadClaim
from loadgen.run_facts import RunFacts
from loadgen.scenario import GateConfig
from loadgen.targets.facts import ServerFacts
from loadgen.targets.receipts import EndpointStart, ReceiptFacts, ReceiptsSelection
from loadgen.taxonomy import DEFAULT_FAIL_ON, SEVERITY
from tests.support.receipts import parallel

START = "start-1"


def stats(measured: int, failing: int = 0, infra: int = 0, interrupted: int = 0,
          late: bool = False) -> PhaseStats:
    """A measurement of `measured` requests (infrastructure errors among them), the
    first `failing` of them failed (the last ones, with `late`)."""
    st = PhaseStats()
    st.requests = measured + interrupted
    st.interrupted, st.infra_errors = interrupted, infra
    seqs = range(measured - failing, measured) if late else range(failing)
    st.failing_seqs = set(seqs)
    if failing:
        st.verdicts["stuck_in_reasoning"] = failing
    st.timeline = [TimelinePoint(seq, "x", 1, 0.0, seq in st.failing_seqs)
                   for seq in range(measured)]
    return st


def receipt(pid: int, *, violations: int = 0, calls: int = 500) -> dict[str, Any]:
    """A patched model process's receipt (capacity layout) of the measured start."""
    return {
        "file": f"h-{pid}.json", "pid": pid, "process": f"VLLM::proc{pid}",
        "layout": "capacity", "patched": True, "upstream_variant": "prefix",
        "vllm_version": "0.32.0", "server": {"id": START},
        "guard": {"mode": "1", "calls": calls, "violations": violations},
        "model": {"loaded": True, "architectures": ["DeepseekV4ForCausalLM"],
                  "c128a_builders": 1, "parallel": parallel(),
                  "hooks": {"model_loader": "ok", "c128a_builders": "ok"}},
    }


def gate(cfg: GateConfig, st: PhaseStats, *, receipts: list[dict[str, Any]] | None = None,
         context: GateContext | None = None, **run: Any) -> GateResult:
    run = {"ready": [{"url": "http://x"}], **run}
    facts = RunFacts(run_id="r", scenario="s", base_urls=["http://x"], **run)
    server = ServerFacts(receipts=ReceiptFacts.from_dicts(
        receipts or [], endpoints=[EndpointStart("http://x", (START,))]),
        selection=ReceiptsSelection(receipts_dir="/receipts"))
    return gate_mod.evaluate(cfg, st, facts, server, context)


# ------------------------------------------------------------------ the run completed


@pytest.mark.parametrize("run,code", [
    ({"invalid": "server not ready after 600 s"}, 2),
    ({"interrupted": "interrupted by SIGINT"}, 130),
])
def test_a_run_that_did_not_complete_never_passes_on_plenty_of_clean_replies(
        run: dict[str, str], code: int) -> None:
    # 100 clean measured replies: every other check would pass; the run's own state
    # alone must stop it, and be the one reason given.
    st = stats(100)
    assert gate(GateConfig(), st).exit_code == 0
    result = gate(GateConfig(), st, **run)
    assert result.exit_code == code and not result.passed
    assert result.reasons == list(run.values())
    assert not result.checks[0].passed


def test_a_complete_run_says_so() -> None:
    (first, *_) = gate(GateConfig(), stats(100)).checks
    assert first.passed and first.message == "server ready, all phases ran"


# ----------------------------------------------------------- the count a claim needs


@pytest.mark.parametrize("measured,code", [(59, 0), (58, 2)])
def test_59_clean_replies_prove_5_percent_and_58_do_not(measured: int, code: int) -> None:
    result = gate(GateConfig(prove_below=0.05, allowed=0), stats(measured))
    assert result.exit_code == code and result.required_measured == 59
    (check,) = [c for c in result.checks if c.name.startswith("measured requests")]
    assert check.name == "measured requests >= 59" and check.kind == "error"
    assert check.passed is (code == 0)
    assert check.message == (f"{measured} measured; 59 are needed to prove a failure rate "
                             "below 5% at 95% with 0 allowed")
    if code:
        assert result.reasons == [check.message]


def test_replies_lost_to_infrastructure_are_not_counted_towards_the_claim() -> None:
    # 60 sent, 2 lost (within a limit of 2): 58 replies, one short of 59.
    result = gate(GateConfig(max_infra_errors=2), stats(60, infra=2))
    assert result.exit_code == 2 and result.measured == 58
    assert ("58 measured (60 sent, 2 of them not answered by the model: "
            "http_error/timeout/stream_error, not counted)") in result.reasons[0]
    ok = gate(GateConfig(max_infra_errors=2), stats(61, infra=2))
    assert ok.exit_code == 0
    assert ("2 further measured request(s) got no reply from the model (infrastructure "
            "errors, within the limit of 2) and are not counted in the rate.") in ok.statement


@pytest.mark.parametrize("infra,code", [(1, 0), (2, 2)])
def test_infrastructure_errors_up_to_the_limit_and_not_one_more(infra: int, code: int) -> None:
    result = gate(GateConfig(max_infra_errors=1), stats(100, infra=infra))
    assert result.exit_code == code
    (check,) = [c for c in result.checks if c.name == "infrastructure errors <= 1"]
    assert check.message == f"{infra} http_error/timeout/stream_error in measurement"


# --------------------------------------------------------------- failures, allowed


@pytest.mark.parametrize("failing,code", [(1, 0), (2, 1)])
def test_a_candidate_may_fail_as_many_as_allowed_and_not_one_more(failing: int,
                                                                  code: int) -> None:
    cfg = GateConfig(allowed=1, prove_below=0.1)
    result = gate(cfg, stats(100, failing))
    assert result.exit_code == code
    assert result.checks[-1].message == f"{failing} of 100 failed (allowed 1)"
    if code:
        assert result.reasons == [result.checks[-1].message]


@pytest.mark.parametrize("failing,code", [(1, 1), (2, 0)])
def test_a_control_must_exceed_allowed_to_reproduce(failing: int, code: int) -> None:
    result = gate(GateConfig(role="control", allowed=1), stats(64, failing))
    assert result.exit_code == code
    assert result.checks[-1].name == "control reproduces (> 1 failures)"
    assert result.checks[-1].message == f"{failing} of 64 reproduced the bug (needs more than 1)"


# ------------------------------------------------------------------- the statement


def test_the_statement_says_what_size_of_failure_would_have_been_caught() -> None:
    result = gate(GateConfig(prove_below=0.003), stats(1024))
    assert ("A server failing 0.292% of these requests would have been caught with 95% "
            "probability.") in result.statement


def test_a_bound_not_below_the_asked_rate_is_said_not_to_prove_it() -> None:
    # Allowed 2 of 100 at 10%: 2 failures pass the count, yet the bound (6.2%) proves 10%;
    # 5 failures fail, and the bound (10.2%) does not prove it.
    cfg = GateConfig(allowed=2, prove_below=0.1)
    proved = gate(cfg, stats(100, 2))
    assert "which proves it below 10% as the scenario asks." in proved.statement
    assert proved.statement.startswith("2 of 100 measured requests failed the gate")
    failed = gate(cfg, stats(100, 5))
    assert failed.exit_code == 1
    assert "which does NOT prove it below 10% as the scenario asks." in failed.statement


def test_the_statement_says_how_failures_are_spread() -> None:
    cfg = GateConfig(allowed=40, prove_below=0.3)
    late = gate(cfg, stats(1024, 30, late=True))
    assert "Failures are NOT spread evenly over the run" in late.statement
    assert late.spread.failures == 30
    clean = gate(cfg, stats(1024))
    assert "spread" not in clean.statement


def test_a_control_statement_names_the_reproduction() -> None:
    none = gate(GateConfig(role="control"), stats(64))
    assert none.statement.startswith("0 of 64 measured requests reproduced the bug under "
                                     "this load: the control did not reproduce it.")
    some = gate(GateConfig(role="control"), stats(64, 63))
    assert some.statement.startswith("63 of 64 measured requests reproduced the bug")
    assert "reproduction rate is above 92" in some.statement
    assert some.prove_below is None and some.upper_bound_95 is not None


@pytest.mark.parametrize("st,run,words", [
    (stats(0), {"ready": []}, "Not ready, nothing sent: this run proves nothing."),
    (stats(0), {}, "Nothing sent: this run proves nothing."),
    (stats(3, infra=3), {}, "No reply came from the model: this run proves nothing."),
])
def test_a_run_without_a_rate_says_why_and_bounds_nothing(st: PhaseStats, run: dict,
                                                          words: str) -> None:
    result = gate(GateConfig(max_infra_errors=5), st, **run)
    assert result.statement.startswith(words)
    assert result.no_rate == words.split(":")[0].lower()
    assert result.upper_bound_95 is None and result.detectable_rate_95 is None
    assert result.exit_code == 2


def test_a_measurement_without_replies_after_answered_priming_proves_nothing() -> None:
    context = GateContext(sent=20, answered=16)
    result = gate(GateConfig(max_infra_errors=4), stats(4, infra=4), context=context)
    assert result.no_rate == "no measured reply came from the model"
    nothing = gate(GateConfig(), stats(0), context=GateContext(sent=16, answered=16))
    assert nothing.no_rate == "nothing measured"
    assert nothing.statement.startswith("Nothing measured: this run proves nothing.")


# ------------------------------------------------------------ per verdict, receipts


def test_every_gated_verdict_is_counted_even_when_absent() -> None:
    cfg = GateConfig(role="control", fail_on=["stuck_in_reasoning", "reasoning_loop",
                                              "token_leak"])
    result = gate(cfg, stats(100, 3))
    assert result.per_verdict == {"stuck_in_reasoning": 3, "reasoning_loop": 0,
                                  "token_leak": 0}
    assert result.fail_on == ["stuck_in_reasoning", "reasoning_loop", "token_leak"]


def test_a_candidate_gates_every_failure_verdict_but_those_it_ignores() -> None:
    # fail_on written as a subset (before newer verdicts existed) removes nothing.
    cfg = GateConfig(fail_on=["stuck_in_reasoning", "divergent"], ignore=["token_leak"])
    result = gate(cfg, stats(100, 3))
    expected = {v.value for v in DEFAULT_FAIL_ON} - {"token_leak"} | {"divergent"}
    assert result.fail_on == [v.value for v in SEVERITY if v.value in expected]
    assert result.per_verdict["stuck_in_reasoning"] == 3
    assert result.ignored == ["token_leak"]


def test_a_controls_stride_violations_are_reported_never_gated() -> None:
    cfg = GateConfig(role="control", fail_on_stride_violations=True)
    result = gate(cfg, stats(64, 8), receipts=[receipt(2, violations=7, calls=900)])
    assert result.exit_code == 0
    (check,) = [c for c in result.checks if "stride" in c.name]
    assert check.name == "C128A stride violations (control: expected)" and check.passed
    assert check.message.startswith("7 violation(s) in 900 guarded builder call(s)")
    # The same receipts fail a candidate.
    candidate = gate(GateConfig(fail_on_stride_violations=True), stats(100),
                     receipts=[receipt(2, violations=7, calls=900)])
    assert candidate.exit_code == 1


def test_the_result_carries_the_scenarios_terms() -> None:
    cfg = GateConfig(allowed=1, max_infra_errors=3, prove_below=0.1)
    result = gate(cfg, stats(100, 1, infra=1))
    assert (result.role, result.allowed, result.max_infra_errors, result.infra_errors,
            result.failures, result.prove_below) == ("candidate", 1, 3, 1, 1, 0.1)
    assert result.passed and result.exit_code == 0
    assert result.upper_bound_95 is not None and result.lower_bound_95 is not None
    assert result.lower_bound_95 < 1 / 99 < result.upper_bound_95


# ------------------------------------------------------------- load, priming, spec


LOAD = {"concurrency": 64, "priming": 256, "measurement": 1024, "max_tokens": 16384,
        "rate_limit": 0}


def test_the_statement_names_the_load_and_a_weakened_one() -> None:
    shipped = gate(GateConfig(), stats(100), load=LoadClaim(LOAD, LOAD))
    assert ("the failure rate under this load (concurrency 64, priming 256, 1024 measured, "
            "max_tokens 16384, no rate limit) is below") in shipped.statement
    assert "command line" not in shipped.statement
    weaker = {**LOAD, "concurrency": 8}
    weak = gate(GateConfig(), stats(100), load=LoadClaim(LOAD, weaker, weaker_accepted=True))
    assert "under this load (concurrency 8," in weak.statement
    assert "The load was weakened on the command line" in weak.statement
    control = gate(GateConfig(role="control"), stats(64, 5),
                   load=LoadClaim(LOAD, weaker, weaker_accepted=True))
    assert "reproduced the bug under this load (concurrency 8," in control.statement
    assert "The load was weakened on the command line" in control.statement
    none = gate(GateConfig(role="control"), stats(64),
                load=LoadClaim(LOAD, weaker, weaker_accepted=True))
    assert "The load was weakened on the command line" in none.statement


def test_one_priming_request_asked_is_checked_and_its_loss_makes_the_run_invalid() -> None:
    lost = PhaseStats()
    lost.requests, lost.infra_errors = 1, 1
    result = gate(GateConfig(), stats(100), context=GateContext(priming=lost,
                                                                priming_planned=1))
    assert result.exit_code == 2
    (check,) = [c for c in result.checks if c.name.startswith("priming")]
    assert check.name == "priming reached the model (infrastructure errors <= 0)"
    assert check.message == ("0 of 1 priming requests answered by the model, 1 "
                             "http_error/timeout/stream_error: the server was not warmed up "
                             "as the scenario requires")
    assert result.reasons == [check.message]
    (skipped,) = [c for c in gate(GateConfig(), stats(100)).checks
                  if c.name.startswith("priming")]
    assert skipped.name == "priming reached the model" and skipped.passed


def oracle(solo: int) -> dict[str, Any]:
    """A reference phase of `solo` clean solo replies, each an oracle."""
    summary = ReferenceSummary(solo_replies=solo, oracles=solo, unusable={}, compared=0,
                               verifiable_mismatches=0, identical=0, texts_compared=0,
                               similarity={}, reasoning_similarity={}, batch_invariant=False,
                               per_request=[])
    return {"reference_stats": stats(solo), "reference_summary": summary}


def test_one_reference_request_is_enough_for_the_acceptance_check() -> None:
    from loadgen.scenario import ReferenceConfig

    rates = {"measurement": {"acceptance": 0.2}, "reference": {"acceptance": 0.7}}
    context = GateContext(reference=ReferenceConfig(requests=1), acceptance=rates,
                          **oracle(1))
    result = gate(GateConfig(), stats(100), context=context)
    assert result.exit_code == 1
    (check,) = [c for c in result.checks if c.name.startswith("spec-decode")]
    assert check.name == "spec-decode acceptance under load >= 0.5 x alone"
    assert check.message == "acceptance 0.200 under load, 0.700 alone (ratio 0.29, needs 0.5)"
    # A control is never held to it.
    control = gate(GateConfig(role="control"), stats(64, 5), context=context)
    assert control.exit_code == 0
    assert not [c for c in control.checks if c.name.startswith("spec-decode")]


@pytest.mark.parametrize("phase", ["reference", "measurement"])
def test_acceptance_known_in_one_phase_only_is_nothing_to_compare(phase: str) -> None:
    from loadgen.scenario import ReferenceConfig

    context = GateContext(reference=ReferenceConfig(requests=4),
                          acceptance={phase: {"acceptance": 0.7}}, **oracle(4))
    result = gate(GateConfig(), stats(100), context=context)
    assert result.exit_code == 0
    (check,) = [c for c in result.checks if c.name.startswith("spec-decode")]
    assert check.name == "spec-decode acceptance under load >= 0.5 x alone"
    assert check.message == ("no speculative-decoding metrics in both the reference phase "
                             "and the measurement: nothing to compare")


def test_interrupted_requests_are_not_replies() -> None:
    result = gate(GateConfig(), stats(100, interrupted=3), interrupted="interrupted by SIGTERM")
    assert (result.measured, result.exit_code) == (100, 130)


# ------------------------------------------------------------ the words, in full


def test_a_clean_candidates_statement_in_full() -> None:
    # What a release manager reads of the smallest run that proves the default claim.
    result = gate(GateConfig(), stats(59))
    assert result.statement == (
        "0 of 59 measured requests failed the gate: the failure rate under this load is "
        "below 4.95% at 95% confidence, which proves it below 5% as the scenario asks. "
        "A server failing 4.95% of these requests would have been caught with 95% "
        "probability. This assumes requests fail independently of each other; failures "
        "that grow with the server's history (#52448's came after ~256 clean requests) "
        "are covered only as far as this run's history reaches. No measured request "
        "carried an answer that could be checked exactly: what this run says rests on "
        "the detectors of failure shapes alone.")


def test_what_would_have_been_caught_depends_on_the_failures_allowed() -> None:
    result = gate(GateConfig(allowed=2, prove_below=0.1), stats(1024))
    assert ("A server failing 0.614% of these requests would have been caught with 95% "
            "probability.") in result.statement


def test_the_infrastructure_sentence_follows_the_statement_only_when_there_were_some() -> None:
    ok = gate(GateConfig(max_infra_errors=2), stats(61, infra=2))
    assert ("history reaches. 2 further measured request(s) got no reply from the model"
            in ok.statement)
    assert "further measured" not in gate(GateConfig(), stats(100)).statement
    lost = gate(GateConfig(max_infra_errors=5), stats(3, infra=3))
    assert lost.statement.startswith("No reply came from the model: this run proves nothing.")
    assert "further measured" not in lost.statement


def test_each_checks_name_and_words_on_a_clean_run() -> None:
    # The names are junit testcases; the words are the report's lines.
    result = gate(GateConfig(), stats(100), context=GateContext(priming=stats(16),
                                                                priming_planned=16))
    assert [(c.name, c.message) for c in result.checks if "receipt" not in c.name] == [
        ("run completed", "server ready, all phases ran"),
        ("priming reached the model (infrastructure errors <= 0)",
         "16 of 16 priming requests answered by the model, 0 http_error/timeout/stream_error"),
        ("infrastructure errors <= 0", "0 http_error/timeout/stream_error in measurement"),
        ("measured requests >= 59",
         "100 measured; 59 are needed to prove a failure rate below 5% at 95% with 0 allowed"),
        ("failures <= 0", "0 of 100 failed (allowed 0)"),
    ]
    control = gate(GateConfig(role="control"), stats(64, 5))
    (measured,) = [c for c in control.checks if c.name.startswith("measured requests")]
    assert measured.message == "64 measured"  # a control claims no rate


def test_a_claim_loose_enough_for_one_reply_passes_on_one() -> None:
    cfg = GateConfig(prove_below=0.99)
    assert cfg.required_measured() == 1
    assert gate(cfg, stats(1)).exit_code == 0


@pytest.mark.parametrize("loaded", [0.0, 0.2])
def test_a_drafter_that_accepts_nothing_alone_fails(loaded: float) -> None:
    """Acceptance 0 alone is speculative decoding broken before any load: a failure,
    never a pass on a ratio of zero to zero ("ratio 0.00, needs 0.5" and passed)."""
    from loadgen.scenario import ReferenceConfig

    rates = {"measurement": {"acceptance": loaded},
             "reference": {"drafted": 70.0, "accepted": 0.0, "acceptance": 0.0}}
    context = GateContext(reference=ReferenceConfig(requests=4), acceptance=rates,
                          **oracle(4))
    result = gate(GateConfig(), stats(100), context=context)
    assert result.exit_code == 1
    (check,) = [c for c in result.checks if c.name.startswith("spec-decode")]
    assert not check.passed
    assert check.message == (
        f"acceptance 0.000 alone: none of 70 drafted tokens accepted before any load, "
        f"{loaded:.3f} under load (speculative decoding is not working; needs 0.5 of a "
        "working rate)")


def test_a_bound_equal_to_the_asked_rate_does_not_prove_it() -> None:
    from loadgen.bounds import upper_bound

    # "below" is strict, in the check and in the statement alike.
    cfg = GateConfig(prove_below=upper_bound(0, 100))
    result = gate(cfg, stats(100))
    assert result.required_measured == 101 and result.exit_code == 2
    assert "which does NOT prove it below" in result.statement


def test_a_builder_never_reached_names_the_requests_served() -> None:
    result = gate(GateConfig(require_receipts=True), stats(100), receipts=[receipt(2, calls=0)])
    assert result.exit_code == 2
    assert result.reasons == ["the C128A builder was not reached: 0 builder calls in every "
                              "model process while 100 requests were served"]


def test_a_failed_gate_headlines_how_often_at_least_it_fails(fake_server, tmp_path) -> None:
    """24 of 64 failed: the line says the rate is above the 95% lower bound (what the run
    proved), never "< 48%", which reads like good news; a clean or a passing run keeps
    its upper bound."""
    from loadgen.bounds import lower_bound, upper_bound
    from tests.loadgen.conftest import run_cli
    from tests.support.scenario_files import write_scenario

    _, srv = fake_server(("ok", "stuck"))  # every other reply stuck in reasoning
    sc = write_scenario(tmp_path / "s.toml", load={"measurement": 16},
                        gate={"prove_below": 0.9})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out))
    assert proc.returncode == 1
    failed = json.loads((out / "summary.json").read_text())["gate"]["failures"]
    assert f"{failed}/16 failed, rate > {100 * lower_bound(failed, 16):.2f}% @95%" \
        in proc.stdout
    assert "rate <" not in proc.stdout
    report = (out / "report.md").read_text()
    assert f"the failure rate is above {100 * lower_bound(failed, 16):.2f}%" in report
    assert f"Failure rate &gt;\n{100 * lower_bound(failed, 16):.2f}%" in \
        (out / "report.html").read_text()
    clean = run_cli("run", str(sc), "--base-url", fake_server(("ok",))[1].url, "--out",
                    str(tmp_path / "clean"))
    assert f"0/16 failed, rate < {100 * upper_bound(0, 16):.2f}% @95%" in clean.stdout


def test_impossible_spec_counters_are_an_invalid_run_not_a_pass() -> None:
    from loadgen.scenario import ReferenceConfig

    fine = {"drafted": 70.0, "accepted": 50.0, "acceptance": 50 / 70, "generated": 500.0}
    lying = {"drafted": 700.0, "accepted": 900.0, "acceptance": 900 / 700, "generated": 9e3}
    context = GateContext(reference=ReferenceConfig(requests=4), **oracle(4),
                          acceptance_by_server={"http://x": {"reference": fine,
                                                             "measurement": lying}})
    result = gate(GateConfig(), stats(100), context=context)
    assert result.exit_code == 2


# ------------------------------------- the reference phase and acceptance, at their edges
# Mutants of `reference_checks` and `acceptance_check` that the tests above let live: the
# phase-size boundary, the kind an infrastructure error or a missing oracle makes of the
# run, the fallback to the pooled solo rate, the stuck drafter's bound, and where
# counters stop being possible.


def _reference(requests: int) -> Any:
    from loadgen.scenario import ReferenceConfig

    return ReferenceConfig(requests=requests)


def test_a_reference_phase_of_one_request_is_judged() -> None:
    context = GateContext(reference=_reference(1), reference_stats=stats(1, 1),
                          reference_summary=oracle(1)["reference_summary"])
    result = gate(GateConfig(), stats(100), context=context)
    (check,) = [c for c in result.checks if c.name.startswith("reference phase: the server")]
    assert not check.passed and check.message.startswith("1 of 1 solo replies failed")
    assert result.exit_code == 1


def test_infrastructure_errors_of_the_reference_phase_make_the_run_invalid() -> None:
    solo = stats(4, infra=1)
    context = GateContext(reference=_reference(4), reference_stats=solo,
                          reference_summary=oracle(3)["reference_summary"])
    result = gate(GateConfig(), stats(100), context=context)
    (check,) = [c for c in result.checks
                if c.name == "reference phase: infrastructure errors <= 0"]
    assert not check.passed and check.kind == CheckKind.ERROR
    assert result.exit_code == 2


@pytest.mark.parametrize("failed_alone,code", [(0, 2), (1, 1)])
def test_no_oracle_is_invalid_unless_the_server_failed_alone(failed_alone: int,
                                                             code: int) -> None:
    summary = ReferenceSummary(solo_replies=2, oracles=0, unusable={"b": "failed alone"},
                               compared=0, verifiable_mismatches=0, identical=0,
                               texts_compared=0, similarity={}, reasoning_similarity={},
                               batch_invariant=False, per_request=[])
    context = GateContext(reference=_reference(2), reference_stats=stats(2, failed_alone),
                          reference_summary=summary)
    result = gate(GateConfig(allowed=0), stats(100), context=context)
    (check,) = [c for c in result.checks if c.name == "reference phase: a usable oracle"]
    assert not check.passed
    assert check.kind == (CheckKind.FAILURE if failed_alone else CheckKind.ERROR)
    assert result.exit_code == code


def test_a_server_without_solo_counters_is_held_to_the_pooled_solo_rate() -> None:
    # The server's own reference counters are missing; the pooled solo rate (0.7) is
    # what its collapse under load (0.1) is held to, not the pooled loaded rate (0.6).
    from loadgen.judge.gate.gate import acceptance_check

    context = GateContext(reference=_reference(4), acceptance={
        "reference": {"acceptance": 0.7}, "measurement": {"acceptance": 0.6}},
        acceptance_by_server={"http://a": {"measurement": {
            "drafted": 700.0, "accepted": 70.0, "acceptance": 0.1}}})
    check = acceptance_check(context)
    assert check is not None and not check.passed
    assert check.message == ("acceptance 0.100 under load, 0.700 alone (ratio 0.14, "
                             "needs 0.5)")


@pytest.mark.parametrize("generated,stuck", [(63.0, False), (64.0, True)])
def test_a_drafter_is_stuck_from_the_stated_number_of_tokens(generated: float,
                                                             stuck: bool) -> None:
    from loadgen.judge.gate.gate import STUCK_DRAFTER_TOKENS, acceptance_check

    assert STUCK_DRAFTER_TOKENS == 64
    fine = {"drafted": 70.0, "accepted": 50.0, "acceptance": 50 / 70, "generated": 500.0}
    stopped = {"drafted": 0.0, "accepted": 0.0, "acceptance": None, "generated": generated}
    check = acceptance_check(GateContext(reference=_reference(4), acceptance_by_server={
        "http://a": {"reference": fine, "measurement": stopped}}))
    assert check is not None and check.passed is not stuck


@pytest.mark.parametrize("accepted,possible", [(500.0, True), (501.0, False)])
def test_counters_are_impossible_from_more_accepted_than_generated(accepted: float,
                                                                   possible: bool) -> None:
    from loadgen.judge.gate.gate import impossible_spec_counters

    counters = {"drafted": 1000.0, "accepted": accepted, "generated": 500.0}
    found = impossible_spec_counters({"http://a": {"measurement": counters}})
    assert (found == []) is possible
    assert possible or found == ["http://a measurement: 501 accepted, 500 generated"]
    drafted = {"drafted": 100.0, "accepted": 100.0, "generated": 5000.0}
    assert impossible_spec_counters({"": {"reference": drafted}}) == []
    over = {**drafted, "accepted": 101.0}
    assert impossible_spec_counters({"": {"reference": over}}) == [
        "reference: 101 accepted of 100 drafted"]
