"""A qualification's verdict from its two sides: every path to each exit code, the reasons
and statements its pages print, and what the model check says. The sides are judged runs
built in-process (no server, no subprocess, no statistics: only what `decide` reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadgen.judge.gate.aggregate import RunStats
from loadgen.judge.gate.gate import GateResult
from loadgen.judge.gate.qualification import (
    NOT_REPRODUCED,
    OTHER_MODEL,
    ModelCheck,
    Qualification,
    check_models,
    decide,
    release_text,
)
from loadgen.judge.gate.run_report import RunReport
from loadgen.results import RunFacts
from loadgen.scenario import Scenario
from loadgen.targets.facts import ModelIdentity, ServerFacts
from loadgen.targets.receipts import ProcessReceipt, ReceiptFacts

OUT = Path("/results/q")


def receipt(vllm: str | None = "0.28.0", model: str | None = "org/ckpt",
            revision: str | None = None) -> ProcessReceipt:
    return ProcessReceipt(file="r.json", pid=1, process="EngineCore", layout=None,
                          patched=True, upstream_variant=None, vllm_version=vllm,
                          guard_mode=None, guard_calls=0, violations=0,
                          first_violation=None, model_known=True, runs_model=True,
                          architectures=[], c128a_builders=0, hooks={}, model_name=model,
                          revision=revision)


def side(role: str, exit_code: int, *, reasons: list[str] | None = None, model: str = "m",
         receipts: list[ProcessReceipt] | None = None, versions: list[str] | None = None,
         failures: int = 0, measured: int = 100, allowed: int = 0,
         fail_on: list[str] | None = None, roots: list[str] | None = None) -> RunReport:
    gate = GateResult(role=role, passed=exit_code == 0, failures=failures, allowed=allowed,
                      measured=measured, upper_bound_95=None, lower_bound_95=None,
                      exit_code=exit_code, fail_on=fail_on or ["stuck_in_reasoning"],
                      infra_errors=0, max_infra_errors=0, required_measured=0,
                      prove_below=None, detectable_rate_95=None, reasons=reasons or [])
    server = ServerFacts(receipts=ReceiptFacts(receipts or []), versions=versions or [],
                         model_roots={model: roots} if roots else {})
    run = RunFacts(run_id=role, scenario="s", base_urls=["http://x"], model=model)
    return RunReport(OUT / role, Scenario(name="s"), run, server, RunStats({}, 0, None), gate)


def reproduced(**kw: Any) -> RunReport:
    """A control whose gate passed: it reproduced the bug."""
    return side("control", 0, failures=40, **kw)


def verdict(q: Qualification) -> tuple[int, str, list[str]]:
    return q.exit_code, q.verdict, q.reasons


# ---------------------------------------------------------------- the control side

def test_an_interrupted_control_interrupts_the_qualification() -> None:
    q = decide(OUT, "s", side("control", 130, reasons=["stopped"]), None)
    assert verdict(q) == (130, "INTERRUPTED", ["the control run was interrupted"])
    assert q.passed is False


def test_an_invalid_control_makes_it_invalid_with_the_controls_reasons() -> None:
    control = side("control", 2, reasons=["server not ready", "3 infrastructure errors"])
    q = decide(OUT, "s", control, side("candidate", 0))
    assert verdict(q) == (2, "INVALID", ["the control run is invalid: server not ready; "
                                         "3 infrastructure errors"])


def test_a_control_that_did_not_reproduce_says_how_far_it_fell_short() -> None:
    control = side("control", 1, failures=1, measured=256, allowed=2,
                   fail_on=["stuck_in_reasoning", "garbled"])
    q = decide(OUT, "s", control, None)
    detail = ("1 of 256 measured requests with stuck_in_reasoning, garbled; it needs more "
              "than 2")
    assert verdict(q) == (2, "INVALID", [NOT_REPRODUCED.format(detail=detail)])
    assert q.reasons[0].startswith("the positive control did not reproduce the bug (1 of "
                                   "256 measured requests with stuck_in_reasoning, garbled;")
    assert q.reasons[0].endswith("the candidate was not run")


def test_a_stop_after_the_control_reproduced_is_an_interruption() -> None:
    q = decide(OUT, "s", reproduced(), None)
    assert verdict(q) == (130, "INTERRUPTED", ["interrupted before the candidate ran"])
    assert q.candidate is None and q.statements == ["control model: m",
                                                    "control: release unknown (no receipt, "
                                                    "no /version)"]


# -------------------------------------------------------------- the candidate side

@pytest.mark.parametrize(("code", "word"), [(0, "QUALIFIED"), (1, "NOT QUALIFIED"),
                                            (2, "INVALID"), (130, "INTERRUPTED")])
def test_the_candidates_gate_decides_once_the_control_reproduced(code: int, word: str) -> None:
    candidate = side("candidate", code, reasons=["3 of 256 failed", "bound 2.4%"])
    q = decide(OUT, "s", reproduced(), candidate)
    assert verdict(q) == (code, word, ["candidate: 3 of 256 failed", "candidate: bound 2.4%"])
    assert q.passed is (code == 0)


def test_a_clean_candidate_beside_a_rare_reproduction_is_not_proven() -> None:
    # 2 of 256 reproduced, 0 of 256 failed: a candidate as broken as the control would
    # score that about one time in eight, so the sides are not shown to differ.
    control = side("control", 0, failures=2, measured=256)
    candidate = side("candidate", 0, failures=0, measured=256)
    q = decide(OUT, "s", control, candidate)
    assert (q.exit_code, q.verdict) == (2, "NOT PROVEN")
    assert q.difference is not None and q.difference.per_side_needed == 577
    assert q.reasons == [q.difference.sentence()]
    assert "Fisher's exact test, one-sided" in q.reasons[0]
    # Enough reproductions make the same clean candidate QUALIFIED, by the same test.
    q = decide(OUT, "s", side("control", 0, failures=13, measured=64),
               side("candidate", 0, measured=64))
    assert (q.exit_code, q.verdict) == (0, "QUALIFIED") and q.difference.proven


def test_a_candidate_code_without_a_word_reads_invalid() -> None:
    q = decide(OUT, "s", reproduced(), side("candidate", 3))
    assert (q.exit_code, q.verdict) == (3, "INVALID")


def test_a_control_of_another_model_makes_it_invalid_unless_allowed() -> None:
    control = reproduced(model="always-stuck")
    candidate = side("candidate", 0, reasons=["all good"])
    q = decide(OUT, "s", control, candidate)
    detail = "served name always-stuck vs m"
    assert verdict(q) == (2, "INVALID", [OTHER_MODEL.format(detail=detail),
                                         "candidate: all good"])
    assert q.models is not None and q.models.to_dict()["same"] is False
    allowed = decide(OUT, "s", control, candidate, allow_different_models=True)
    assert verdict(allowed) == (0, "QUALIFIED", ["candidate: all good"])
    assert allowed.statements[0] == ("the sides served different models (served name "
                                     "always-stuck vs m), allowed by "
                                     "qualify.allow_different_models")
    # An interrupted candidate is an interruption, whatever it served.
    stopped = decide(OUT, "s", control, side("candidate", 130))
    assert (stopped.exit_code, stopped.reasons) == (130, [])


@pytest.mark.parametrize("stated", ["roots", "receipts"])
def test_the_same_checkpoint_under_another_name_is_the_same_model(stated: str) -> None:
    # A control served as "dsv4-control", the candidate as "dsv4", one checkpoint: the
    # server's root (or the receipts' model and revision) says so.
    def facts(model: str) -> dict[str, Any]:
        if stated == "roots":
            return {"model": model, "roots": ["/root/.cache/huggingface/hub/models--"
                                              "deepseek-ai--DeepSeek-V4-Flash/snapshots/1a"
                                              if model == "dsv4" else
                                              "deepseek-ai/DeepSeek-V4-Flash"]}
        return {"model": model, "receipts": [receipt(model="deepseek-ai/DeepSeek-V4-Flash",
                                                     revision="0731")]}

    control = reproduced(**facts("dsv4-control"))
    candidate = side("candidate", 0, reasons=["all good"], **facts("dsv4"))
    q = decide(OUT, "s", control, candidate)
    assert verdict(q) == (0, "QUALIFIED", ["candidate: all good"])
    assert q.statements[0].startswith("both sides served the same checkpoint under other "
                                      "names: control dsv4-control")
    # Another checkpoint under another name is another model, named by both.
    other = side("candidate", 0, model="dsv4", roots=["deepseek-ai/DeepSeek-V4-Pro"]) \
        if stated == "roots" else \
        side("candidate", 0, model="dsv4", receipts=[receipt(
            model="deepseek-ai/DeepSeek-V4-Flash", revision="0801")])
    q = decide(OUT, "s", control, other)
    assert q.exit_code == 2 and q.reasons[0].startswith(
        "the control and the candidate do not serve the same model (served name "
        "dsv4-control vs dsv4; ")


def test_every_difference_is_named() -> None:
    control = reproduced(model="a", receipts=[receipt(model="org/one", revision="r1")])
    candidate = side("candidate", 0, model="b",
                     receipts=[receipt(model="org/two", revision="r2")])
    q = decide(OUT, "s", control, candidate)
    differences = ("served name a vs b; model loaded (receipts) org/one vs org/two; "
                   "revision (receipts) r1 vs r2")
    assert q.reasons[0] == OTHER_MODEL.format(detail=differences)
    allowed = decide(OUT, "s", control, candidate, allow_different_models=True)
    assert allowed.statements[0] == (f"the sides served different models ({differences}), "
                                     "allowed by qualify.allow_different_models")


# ------------------------------------------------------------ what the pages state

def test_a_qualification_states_what_each_side_served_and_ran() -> None:
    control = reproduced(receipts=[receipt("0.27.1"), receipt("0.27.2")])
    candidate = side("candidate", 0, versions=["0.28.0"])
    q = decide(OUT, "scen", control, candidate, command="demo")
    assert q.statements == ["both sides served m (loaded from org/ckpt)",
                            "control: vLLM 0.27.1, 0.27.2 (patch receipts)",
                            "candidate: 0.28.0 (/version)"]
    assert (q.out_dir, q.scenario, q.command) == (OUT, "scen", "demo")
    assert q.control is control and q.candidate is candidate
    assert decide(OUT, "s", control, candidate).command == "qualify"


def test_a_release_comes_from_the_receipts_before_the_version_endpoint() -> None:
    both = side("x", 0, receipts=[receipt("0.28.0")], versions=["9.9.9"])
    assert release_text(both) == "vLLM 0.28.0 (patch receipts)"
    assert release_text(side("x", 0, versions=["0.28.0", "0.28.1"])) == \
        "0.28.0, 0.28.1 (/version)"
    # A receipt that names no vLLM release says nothing of it.
    assert release_text(side("x", 0, receipts=[receipt(None)])) == \
        "release unknown (no receipt, no /version)"


def test_the_model_check_as_the_pages_show_it() -> None:
    control = reproduced(receipts=[receipt()])
    candidate = side("candidate", 0, receipts=[receipt()])
    check = check_models(control, candidate, False)
    assert check.same and check.to_dict() == {
        "same": True, "allowed": False, "differences": [],
        "control": {"name": "m", "roots": [], "models": ["org/ckpt"], "revisions": []},
        "candidate": {"name": "m", "roots": [], "models": ["org/ckpt"], "revisions": []}}
    alone = check_models(control, None, True)
    assert alone.to_dict() == {
        "same": True, "allowed": True, "differences": [],
        "control": {"name": "m", "roots": [], "models": ["org/ckpt"], "revisions": []},
        "candidate": None}
    assert alone.statement() == "control model: m (loaded from org/ckpt)"
    assert check_models(control, candidate, True).allowed is True


def test_a_model_check_with_differences_is_not_the_same() -> None:
    check = ModelCheck(ModelIdentity("a"), ModelIdentity("b"), ["served name a vs b"])
    assert check.same is False and check.allowed is False
    assert check.statement() == ("the sides served different models (served name a vs b), "
                                 "allowed by qualify.allow_different_models")
