"""The receipt rules' words when there is more than one of a thing, or none.

A release manager reads these messages to find which processes, ranks, hooks or
endpoints to look at: with two of them, both must be named and told apart; with none,
the message must say so rather than print an empty list. The single-item cases are in
test_receipt_rules_words.py.
"""

from __future__ import annotations

from typing import Any

from loadgen.judge.gate.receipt_rules import receipts_check
from loadgen.scenario import GateConfig
from loadgen.targets.receipts import EndpointStart, ReceiptFacts
from tests.support.receipts import api_server, parallel, receipt

URL, START = "http://s", "today"
WHERE = f"{URL} (server id {START})"


def check(receipts: list[dict[str, Any]], endpoints: list[EndpointStart] | None = None,
          **cfg: Any) -> tuple[bool, str, str]:
    facts = ReceiptFacts.from_dicts(receipts, endpoints=endpoints or [
        EndpointStart(URL, (START,))])
    c = receipts_check(GateConfig(**{"require_receipts": True, **cfg}), facts, "/r", 100)
    return c.passed, c.kind, c.message


def test_a_drafter_and_its_target_are_both_named_by_architecture() -> None:
    # DeepSeek-V4 with its MTP drafter in one process list: both architectures, sorted.
    data = receipt(2, START, c128a=0, calls=0,
                   architectures=["DeepseekV4ForCausalLM", "DeepSeekV4MTPModel"])
    assert check([data]) == (False, "error", (
        "VLLM::Worker (pid 2) loaded a DeepSeek-V4 model (DeepSeekV4MTPModel, "
        "DeepseekV4ForCausalLM), which has C128A layers, and made no C128A metadata builder: "
        "the model watch missed them, so what the builder did cannot be known"))


def test_a_v4_model_known_only_by_its_type_is_shown_as_unnamed() -> None:
    # A receipt with model type deepseek_v4 but no architecture listed: "?" stands for it.
    data = receipt(2, START, c128a=0, calls=0, architectures=[])
    assert check([data])[2].startswith(
        "VLLM::Worker (pid 2) loaded a DeepSeek-V4 model (?), which has C128A layers")


def test_two_data_parallel_ranks_that_wrote_are_both_named() -> None:
    receipts = [receipt(2, START, place=parallel(dp_size=3, dp_index=0)),
                receipt(3, START, place=parallel(dp_size=3, dp_index=1))]
    assert check(receipts)[2].startswith(
        f"{WHERE} serves 3 data-parallel rank(s), but only rank(s) 0, 1 wrote a receipt")


def test_two_workers_of_a_short_rank_are_both_named() -> None:
    receipts = [receipt(2, START, place=parallel(world=3, rank=0)),
                receipt(3, START, place=parallel(world=3, rank=2))]
    assert check(receipts)[2].startswith(
        f"data-parallel rank 0 of {WHERE} has receipts from worker(s) 0, 2 of its 3:")


def test_every_endpoint_that_cannot_be_tied_is_named() -> None:
    endpoints = [EndpointStart(URL, (), "http://s said nothing"),
                 EndpointStart("http://t", (), "http://t said nothing")]
    assert check([receipt(2, START)], endpoints) == (False, "error", (
        "http://s said nothing; http://t said nothing: the 1 receipt(s) in /r cannot be tied "
        "to the server measured"))


def test_every_unwatched_builder_hook_is_named() -> None:
    def unwatched(pid: int, why: str) -> dict[str, Any]:
        return receipt(pid, START, c128a=0, calls=0, place=parallel(world=2, rank=pid - 2),
                       hooks={"model_loader": "ok", "c128a_builders": why})
    assert check([unwatched(2, "no class"), unwatched(3, "renamed")])[2].startswith(
        "the model watch could not count C128A builders (VLLM::Worker (pid 2): no class; "
        "VLLM::Worker (pid 3): renamed), so")


def test_every_hook_not_installed_is_named() -> None:
    hooks = {"model_loader": "no such hook", "c128a_builders": "no class"}
    assert check([api_server(2, START, hooks=hooks)])[2] == (
        f"no receipt from a process that runs the model for {WHERE} (receipts of that start: "
        "vllm serve (pid 2); hooks not installed: vllm serve (pid 2): c128a_builders: no "
        "class; vllm serve (pid 2): model_loader: no such hook): the processes that build "
        "C128A metadata must write their receipts where the run reads them")


def test_receipts_older_than_the_model_watch_are_called_so() -> None:
    old = api_server(2, START)
    del old["model"]  # written by a plugin before it watched the model
    assert check([old])[2] == (
        f"no receipt from a process that runs the model for {WHERE} (receipts of that start: "
        "vllm serve (pid 2); receipts written before the model watch existed): the "
        "processes that build C128A metadata must write their receipts where the run reads "
        "them")


def test_an_endpoint_whose_start_left_no_receipt_is_told_none() -> None:
    # Two measured endpoints; only the first one's start wrote receipts.
    endpoints = [EndpointStart(URL, (START,)), EndpointStart("http://t", ("other",))]
    assert check([receipt(2, START)], endpoints) == (False, "error", (
        "no receipt from a process that runs the model for http://t (server id other) "
        "(receipts of that start: none): the processes that build C128A metadata must write "
        "their receipts where the run reads them"))


def test_a_model_process_that_does_not_say_where_it_sits_voids_the_run() -> None:
    data = receipt(2, START)
    del data["model"]["parallel"]
    assert check([data]) == (False, "error", (
        f"the receipts of VLLM::Worker (pid 2) ({WHERE}) do not say which data-parallel rank "
        "and worker they are, so whether every process that serves the endpoint wrote one "
        "cannot be told"))
