"""The scenarios shipped for GPU nodes: each validates, says what it proves, and holds
the numbers of the protocol it is named after."""

from __future__ import annotations

import pytest
from static_support import env_example

from loadgen.scenario import LongContextWorkload, load_scenario

NAMES = ["issue-52448", "pr-51318", "positive-control", "release-gate", "nightly-soak"]
THINKING = {"thinking": True, "reasoning_effort": "high"}
# The #52448 signature must fail every gate that guards against it.
BUG = "stuck_in_reasoning"


@pytest.mark.parametrize("name", NAMES)
def test_validates_and_says_what_it_proves(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.name == name
    assert len(scenario.description.split()) >= 30, "say what a pass proves"
    assert BUG in scenario.gate.gated()
    assert scenario.request.temperature == 0.0
    assert scenario.request.chat_template_kwargs == THINKING
    assert scenario.target.base_urls == [], "the server comes from --base-url"


def test_issue_52448_is_the_reporters_workload() -> None:
    s = load_scenario("issue-52448")
    assert (s.load.concurrency, s.load.priming, s.load.measurement) == (64, 0, 1024)
    assert s.request.max_tokens == 16384
    assert s.workload.kind == "tool-turn" and s.workload.accounts == 1  # one identical turn
    assert (s.gate.role, s.gate.allowed, s.gate.prove_below) == ("candidate", 0, 0.003)
    # 0 of 1024 proves < 0.3% (the scenario text says so); 998 would be the least.
    assert s.gate.required_measured() == 998 <= s.load.measurement


def test_pr_51318_is_the_fixes_validation_protocol() -> None:
    s = load_scenario("pr-51318")
    assert (s.load.concurrency, s.load.priming, s.load.measurement) == (32, 256, 256)
    assert s.request.max_tokens == 16384 and s.workload.kind == "tool-turn"
    assert (s.gate.allowed, s.gate.max_infra_errors, s.gate.prove_below) == (0, 0, 0.012)
    assert s.gate.required_measured() == 249 <= s.load.measurement  # 0 of 256: < 1.2%


def test_positive_control_must_reproduce() -> None:
    s = load_scenario("positive-control")
    assert s.gate.role == "control"
    assert s.gate.fail_on == [BUG], "the control reproduces #52448, not something else"
    # The reporter's first ~256 requests came back clean: measure after them.
    assert s.load.priming >= 256 and s.load.concurrency >= 10


@pytest.mark.parametrize("name", ["release-gate", "nightly-soak"])
def test_gates_of_our_server_require_its_receipts(name: str) -> None:
    s = load_scenario(name)
    assert s.gate.role == "candidate" and s.gate.require_receipts
    assert s.load.priming > 0, "a cold server hides the bug"


@pytest.mark.parametrize("name", NAMES)
def test_requests_fit_the_servers_context(name: str) -> None:
    """A prompt plus max_tokens over max_model_len is a 400 from vLLM: an infra error,
    not a verdict. Leave room for the tokenizer counting 15% more than estimated and
    for the tools and instructions around the document."""
    s = load_scenario(name)
    max_model_len = int(env_example().values["DSV4_MAX_MODEL_LEN"])
    longest = 2048
    if isinstance(s.workload, LongContextWorkload):
        longest = int(max(s.workload.context_tokens) * 1.15) + 2048
    assert longest + s.request.max_tokens <= max_model_len


@pytest.mark.parametrize("name", [n for n in NAMES if n != "nightly-soak"])
def test_a_gate_whose_server_restarts_is_invalid(name: str) -> None:
    """A restart mid-run resets the uptime the bug needs: one run, one server start."""
    assert load_scenario(name).load.on_server_restart == "invalid"


def test_the_soak_goes_on_after_a_server_restart() -> None:
    s = load_scenario("nightly-soak")
    assert s.load.on_server_restart == "continue"
    # The server reloads the checkpoint before it is back.
    assert s.load.restart_ready_timeout_s >= s.target.ready_timeout_s
