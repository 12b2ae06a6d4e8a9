"""The receipt rules, each branch with its verdict and the words it gives.

What a release manager reads when the receipts fail or pass a run: which process, which
layout, what the stride guard saw, why the run is invalid. Each case holds the check's
outcome (pass, fail = exit 1, error = run invalid) and its full message, where a one-token
change to `loadgen/judge/gate/receipt_rules.py` went unnoticed before (`benchmarks/mutation.py`).
"""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.judge.gate.receipt_rules import receipts_check, receipts_statement, stride_check
from loadgen.scenario import GateConfig
from loadgen.targets.receipts import EndpointStart, ReceiptFacts, SetAside
from tests.support.receipts import api_server, parallel, receipt

URL, START = "http://s", "today"
NAME = "patch receipts prove the C128A builder"
WORKER2 = "VLLM::Worker (pid 2)"
FIRST = ("builder call 2: decode rows at stride 64, buffer row stride 640 (2 decode + 0 "
         "prefill tokens, width 64)")


def facts(receipts: list[dict[str, Any]], *, set_aside: int = 0) -> ReceiptFacts:
    return ReceiptFacts.from_dicts(
        receipts, endpoints=[EndpointStart(URL, (START,))],
        set_aside=[SetAside(f"old-{i}.json", "of yesterday") for i in range(set_aside)])


def check(receipts: ReceiptFacts, **cfg: Any) -> tuple[str, bool, str, str]:
    c = receipts_check(GateConfig(**{"require_receipts": True, **cfg}), receipts, "/r", 100)
    return c.name, c.passed, c.kind, c.message


def no_builder(**kwargs: Any) -> dict[str, Any]:
    return receipt(2, START, c128a=0, calls=0, **kwargs)


def test_the_0_27_fix_a_patched_capacity_process_on_a_packed_release_passes() -> None:
    # vLLM 0.27.x's own builder writes packed (#52448); our patched builder in its place
    # writes capacity, and that is what the model ran.
    fixed = facts([api_server(1, START), receipt(2, START, layout="capacity",
                                                 upstream="packed", vllm="0.27.1")])
    assert check(fixed) == (NAME, True, "failure", "1 model process(es) ran capacity; the "
                            "stride guard saw 40 C128A builder call(s) in 1 of them and no "
                            "violation")
    # The same release left to its own builder runs packed: the gate fails (exit 1).
    unfixed = facts([receipt(2, START, layout="off", upstream="packed", vllm="0.27.1")])
    assert check(unfixed) == (NAME, False, "failure", "the model ran the packed C128A layout "
                              f"(the #52448 bug) in {WORKER2}")
    ours = facts([receipt(2, START, layout="packed")])
    assert check(ours)[1:3] == (False, "failure")


def test_a_candidates_violations_fail_it_with_the_first_named() -> None:
    violating = facts([api_server(1, START), receipt(2, START, violations=7)])
    assert check(violating) == (
        NAME, False, "failure", f"the stride guard counted 7 C128A stride violation(s) in "
        f"{WORKER2}; the first at {FIRST}: the builder left rows off the capacity stride a "
        "captured CUDA graph reads")
    assert receipts_statement(GateConfig(), violating) == (
        f"The candidate's stride guard counted 7 C128A stride violation(s) in {WORKER2}; the "
        f"first at {FIRST}: its C128A builder wrote rows off the stride a captured CUDA graph "
        "reads, so it fails whatever its replies.")
    assert receipts_statement(GateConfig(role="control"), violating) == (
        f"The control's stride guard counted 7 C128A stride violation(s) in {WORKER2}; the "
        f"first at {FIRST}: its builder wrote the rows the bug misreads.")
    stride = stride_check(violating, "candidate")
    assert (stride.name, stride.passed, stride.message) == (
        "no C128A stride violations", False,
        f"7 violation(s) in 40 guarded builder call(s); first at {FIRST}")
    clean = stride_check(facts([receipt(2, START)]), "candidate")
    assert (clean.name, clean.passed, clean.message) == (
        "no C128A stride violations", True, "0 violation(s) in 40 guarded builder call(s)")


def test_a_first_violation_in_the_prefill_view_is_described_as_such() -> None:
    data = receipt(2, START, violations=1)
    data["guard"]["first_violation"] = {
        "call": 9, "views": ["prefill", "decode"], "prefill_row_stride": 8,
        "prefill_buffer_row_stride": 128, "num_decode_tokens": 0,
        "num_prefill_tokens": 12, "max_compressed_tokens": 8}
    message = stride_check(facts([data]), "candidate").message
    assert message == ("1 violation(s) in 40 guarded builder call(s); first at builder call 9: "
                       "prefill rows at stride 8, buffer row stride 128 (0 decode + 12 prefill "
                       "tokens, width 8)")
    data["guard"]["first_violation"]["views"] = "prefill"  # not a list: decode assumed
    assert "first at builder call 9: decode rows at stride None" in \
        stride_check(facts([data]), "candidate").message


def test_no_builder_call_seen_makes_the_stride_check_an_error() -> None:
    result = stride_check(facts([receipt(2, START, calls=0)]), "candidate")
    assert (result.name, result.passed, result.kind, result.message) == (
        "no C128A stride violations", False, "error", "the stride guard reported no builder "
        "calls (guard off, receipts not read, or the builder never ran)")


@pytest.mark.parametrize("receipts,cfg,expected", [
    ([receipt(2, START, layout="prefix"),
      receipt(3, START, layout="odd", place=parallel(world=2, rank=1))], {},
     ("failure", "the model ran layout odd in VLLM::Worker (pid 3); the scenario accepts "
                 "capacity, prefix")),
    ([receipt(2, START, layout="off", upstream="prefix")], {"accept_layouts": ["capacity"]},
     ("failure", "the model ran upstream's own builder (layout off), which writes prefix in "
                 f"this release, in {WORKER2}; the scenario accepts capacity")),
    ([receipt(2, START, layout="off", upstream="weird")], {},
     ("error", "the model ran upstream's own builder (layout off) in VLLM::Worker (pid 2), and "
               "what it writes in that vLLM release is unknown")),
    ([no_builder(hooks={"model_loader": "ok", "c128a_builders": "no class"})], {},
     ("error", f"the model watch could not count C128A builders ({WORKER2}: no class), so a "
               "model without C128A layers cannot be told from a builder that was never "
               "reached")),
    ([no_builder()], {},
     ("error", f"{WORKER2} loaded a DeepSeek-V4 model (DeepseekV4ForCausalLM), which has C128A "
               "layers, and made no C128A metadata builder: the model watch missed them, so "
               "what the builder did cannot be known")),
    ([no_builder(architectures=[], model_type="")], {},
     ("error", f"the receipts of {WORKER2} do not say which model they loaded, so a model "
               "without C128A layers cannot be told from a builder never reached")),
    ([receipt(2, START, calls=0)], {},
     ("error", "the C128A builder was not reached: 0 builder calls in every model process "
               "while 100 requests were served")),
    ([receipt(2, START, place=parallel(world=2, rank=0)),
      receipt(3, START, calls=0, place=parallel(world=2, rank=1))], {},
     ("error", "no C128A builder call in VLLM::Worker (pid 3)")),
])
def test_receipts_that_fail_or_void_a_candidate(receipts: list, cfg: dict,
                                                expected: tuple[str, str]) -> None:
    assert check(facts(receipts), **cfg) == (NAME, False, *expected)


def test_a_v41_name_the_receipt_does_not_confirm_voids_the_run() -> None:
    data = no_builder(architectures=["DeepseekV41ForCausalLM"], model_type="deepseek_v41")
    del data["model"]["compress_ratios"]
    assert check(facts([data])) == (
        NAME, False, "error", f"{WORKER2} loaded a model named DeepSeek-V4.1 "
        "(DeepseekV41ForCausalLM) whose receipt does not confirm it (its architecture, model "
        "type deepseek_v41 and compress ratios without 128)")
    assert receipts_statement(GateConfig(), facts([data])) == ""


def test_the_stride_guard_off_voids_the_run() -> None:
    data = receipt(2, START)
    data["guard"]["mode"] = "0"
    assert check(facts([data])) == (NAME, False, "error", f"the stride guard is off in {WORKER2} "
                                    "(DSV4_QUAL_GUARD=0): its builder calls cannot be seen")


@pytest.mark.parametrize("ratios,said", [([4, 0], "0, 4"), ([], "none")])
def test_a_v41_model_rests_on_its_replies_and_the_statement_says_so(ratios: list[int],
                                                                    said: str) -> None:
    receipts = facts([no_builder(architectures=["DeepseekV41ForCausalLM"],
                                 model_type="deepseek_v41", compress_ratios=ratios)])
    words = (f"the model (DeepseekV41ForCausalLM, DeepSeek-V4.1: compress ratios {said}) has no "
             f"C128A layers (no C128A metadata builder in {WORKER2}): nothing to prove about "
             "the C128A builder; the gate rests on the replies alone")
    assert check(receipts) == (NAME, True, "failure", words)
    assert receipts_statement(GateConfig(), receipts) == words[0].upper() + words[1:] + "."
    assert receipts_statement(GateConfig(role="control"), receipts) == ""


def test_another_model_than_deepseek_rests_on_its_replies() -> None:
    receipts = facts([no_builder(architectures=["LlamaForCausalLM"], model_type="llama")])
    words = (f"the model (LlamaForCausalLM) is not a DeepSeek-V4 model: it has no C128A layers "
             f"(no C128A metadata builder in {WORKER2}), so there is nothing to prove about the "
             "C128A builder; the gate rests on the replies alone")
    assert check(receipts) == (NAME, True, "failure", words)
    assert receipts_statement(GateConfig(), receipts) == words[0].upper() + words[1:] + "."


def test_a_sound_candidate_names_its_layouts_and_calls() -> None:
    receipts = facts([api_server(1, START), receipt(2, START, place=parallel(world=2, rank=0)),
                      receipt(3, START, layout="prefix", place=parallel(world=2, rank=1))])
    assert check(receipts) == (NAME, True, "failure", "2 model process(es) ran capacity, "
                               "prefix; the stride guard saw 80 C128A builder call(s) in 2 of "
                               "them and no violation")
    assert receipts_statement(GateConfig(), receipts) == ""


def test_a_controls_receipts_are_reported_in_words() -> None:
    def control(receipts: ReceiptFacts) -> tuple[str, bool, str, str]:
        return check(receipts, role="control")

    name = "patch receipts (control: reported)"
    assert control(facts([receipt(2, START, violations=3)])) == (
        name, True, "failure",
        "the model ran capacity in 1 process(es); 40 guarded builder call(s), 3 violation(s)")
    assert control(facts([api_server(1, START)])) == (
        name, True, "failure", "1 receipt(s), none from a process that runs the model")
    assert control(facts([], set_aside=5)) == (
        name, True, "failure", "no patch receipt of the measured server start (5 set aside)")
    assert control(facts([])) == (name, True, "failure",
                                  "no patch receipt of the measured server start")


@pytest.mark.parametrize("aside,listed", [
    (3, "old-0.json: of yesterday; old-1.json: of yesterday; old-2.json: of yesterday"),
    (5, "old-0.json: of yesterday; old-1.json: of yesterday; old-2.json: of yesterday; "
        "and 2 more"),
])
def test_receipts_of_other_starts_are_named_three_at_most(aside: int, listed: str) -> None:
    assert check(facts([], set_aside=aside)) == (
        NAME, False, "error", f"no patch receipt in /r belongs to a measured endpoint's current "
        f"server start ({listed}): the server cannot show which C128A builder it ran")


def test_no_model_process_among_a_starts_receipts_voids_the_run() -> None:
    assert check(facts([api_server(1, START)])) == (
        NAME, False, "error", f"no receipt from a process that runs the model for {URL} (server "
        f"id {START}) (receipts of that start: vllm serve (pid 1)): the processes that build "
        "C128A metadata must write their receipts where the run reads them")


WHERE = f"{URL} (server id {START})"


@pytest.mark.parametrize("receipts,words", [
    ([receipt(2, START, place=parallel(dp_size=2, dp_index=0)),
      receipt(3, START, place=parallel(dp_size=2, dp_index=0, world=1, rank=0))],
     f"{WHERE} serves 2 data-parallel rank(s), but only rank(s) 0 wrote a receipt of that "
     "start: the others run on another node (vLLM multi-node data parallel with --headless, "
     "whose processes no endpoint's server id vouches for) or wrote no receipt where the run "
     "reads them; gate each node through its own API server (docs/plugin.md, multi-node)"),
    ([receipt(2, START, place=parallel(world=2, rank=0))],
     f"data-parallel rank 0 of {WHERE} has receipts from worker(s) 0 of its 2: the others "
     "run on another node or wrote no receipt where the run reads them"),
    ([receipt(2, START, place=parallel(world=2, rank=0)),
      receipt(3, START, place=parallel(world=1, rank=0))],
     f"the model processes of {WHERE} disagree on the parallel layout"),
    ([api_server(2, START, hooks={"model_loader": "no such hook", "c128a_builders": "ok"})],
     f"no receipt from a process that runs the model for {WHERE} (receipts of that start: "
     "vllm serve (pid 2); hooks not installed: vllm serve (pid 2): model_loader: no such "
     "hook): the processes that build C128A metadata must write their receipts where the "
     "run reads them"),
])
def test_a_start_whose_serving_processes_are_not_all_accounted_for_voids_the_run(
        receipts: list, words: str) -> None:
    assert check(facts(receipts)) == (NAME, False, "error", words)


@pytest.mark.parametrize("endpoints,said", [
    ([EndpointStart(URL, (), "http://s did not say which server start it is (no "
                    "dsv4_qual_server_start on /metrics)"),
      EndpointStart("http://t", ("t1",))],
     "http://s did not say which server start it is (no dsv4_qual_server_start on /metrics)"),
    ([], "no measured endpoint said which server start it is"),
])
def test_receipts_that_cannot_be_tied_to_the_server_measured_void_the_run(
        endpoints: list[EndpointStart], said: str) -> None:
    receipts = ReceiptFacts.from_dicts([receipt(2, START)], endpoints=endpoints)
    c = receipts_check(GateConfig(require_receipts=True), receipts, "/r", 100)
    assert (c.name, c.passed, c.kind, c.message) == (
        NAME, False, "error", f"{said}: the 1 receipt(s) in /r cannot be tied to the server "
        "measured")


def test_no_receipt_at_all_voids_a_run_that_requires_them_and_says_where_it_looked() -> None:
    nothing = facts([])
    c = receipts_check(GateConfig(require_receipts=True), nothing, "/r", 100)
    assert (c.name, c.passed, c.kind, c.message) == (
        NAME, False, "error", "no patch receipt found in /r: the server cannot show which "
        "C128A builder it ran")
    c = receipts_check(GateConfig(), nothing, None, 100)
    assert (c.name, c.passed, c.message) == (
        NAME, True, "no patch receipt (no target.receipts_dir): the C128A layout the server "
        "ran is unknown; the gate rests on the replies alone")
    aside = receipts_check(GateConfig(), facts([], set_aside=1), "/r", 100)
    assert (aside.name, aside.passed) == (NAME, True)


def test_a_receipt_without_a_builder_hook_status_counts_as_watched() -> None:
    # Receipts of releases before the hook status was written: no "c128a_builders" key.
    data = no_builder(architectures=["DeepseekV41ForCausalLM"], model_type="deepseek_v41",
                      compress_ratios=[4], hooks={"model_loader": "ok"})
    receipts = facts([data])
    assert check(receipts)[1] is True
    assert receipts_statement(GateConfig(), receipts).startswith(
        "The model (DeepseekV41ForCausalLM, DeepSeek-V4.1: compress ratios 4) has no C128A")


def test_violations_without_a_recorded_first_one_are_counted_alone() -> None:
    data = receipt(2, START, violations=2)
    data["guard"]["first_violation"] = None
    assert check(facts([data]))[3] == (
        f"the stride guard counted 2 C128A stride violation(s) in {WORKER2}: the builder left "
        "rows off the capacity stride a captured CUDA graph reads")


def test_the_smaller_words_four_set_aside_two_silent_a_first_without_views() -> None:
    assert check(facts([], set_aside=4))[3].endswith(
        "old-2.json: of yesterday; and 1 more): the server cannot show which C128A builder "
        "it ran")
    silent = facts([receipt(2, START, place=parallel(world=3, rank=0)),
                    receipt(3, START, calls=0, place=parallel(world=3, rank=1)),
                    receipt(4, START, calls=0, place=parallel(world=3, rank=2))])
    assert check(silent)[3] == "no C128A builder call in VLLM::Worker (pid 3), VLLM::Worker " \
        "(pid 4)"
    data = receipt(2, START, violations=1)
    del data["guard"]["first_violation"]["views"]
    assert "first at builder call 2: decode rows at stride 64, buffer row stride 640" in \
        stride_check(facts([data]), "candidate").message


def test_a_model_the_watch_could_not_count_gets_no_no_layers_statement() -> None:
    unwatched = facts([no_builder(architectures=["DeepseekV41ForCausalLM"],
                                  model_type="deepseek_v41", compress_ratios=[4],
                                  hooks={"model_loader": "ok", "c128a_builders": "no class"})])
    assert check(unwatched)[1:3] == (False, "error")
    assert receipts_statement(GateConfig(), unwatched) == ""
