"""Clopper-Pearson bounds, the counts a rate needs, and the gate's decisions and exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadgen.bounds import (
    describe_bound,
    detectable_rate,
    lower_bound,
    required_measured,
    upper_bound,
)
from loadgen.judge.gate import gate as gate_mod
from loadgen.judge.gate.aggregate import PhaseStats
from loadgen.judge.gate.gate import GateResult
from loadgen.run_facts import RunFacts
from loadgen.scenario import GateConfig, Scenario
from loadgen.targets.facts import ServerFacts
from loadgen.targets.receipts import EndpointStart, ReceiptFacts, ReceiptsSelection
from tests.support.receipts import parallel

START = "start-1"  # the server start the measured endpoint names


def tied(data: dict[str, Any]) -> dict[str, Any]:
    """A receipt of the measured endpoint's start; a model process's, at rank 0 of 1."""
    data = {**data, "server": {"id": START}}
    model = data.get("model")
    if isinstance(model, dict) and model.get("loaded") and "parallel" not in model:
        data["model"] = {**model, "parallel": parallel()}
    return data


def test_zero_of_256_is_about_1_16_percent() -> None:
    assert upper_bound(0, 256) == pytest.approx(1 - 0.05 ** (1 / 256), rel=1e-9)
    assert upper_bound(0, 256) == pytest.approx(0.01163, abs=1e-5)
    assert describe_bound(0, 256).endswith("< 1.16% at 95% confidence")


def test_bounds_edges() -> None:
    assert upper_bound(0, 0) is None and lower_bound(0, 0) is None
    assert upper_bound(5, 5) == 1.0
    assert lower_bound(0, 10) == 0.0
    # 298 of 1024 (#52448): the rate is above ~26.9% with 95% confidence.
    assert lower_bound(298, 1024) == pytest.approx(0.2686, abs=2e-3)
    assert upper_bound(298, 1024) > 298 / 1024 > lower_bound(298, 1024)


@pytest.mark.parametrize("rate,allowed,needed", [
    (0.003, 0, 998), (0.012, 0, 249), (0.05, 0, 59), (0.1, 0, 29), (0.003, 1, 1580)])
def test_the_count_a_rate_needs_is_the_first_whose_bound_is_below_it(rate, allowed, needed):
    assert required_measured(rate, allowed) == needed
    assert upper_bound(allowed, needed) < rate <= upper_bound(allowed, needed - 1)


@pytest.mark.parametrize("rate", [0.9, 0.3, 0.1, 0.0457, 0.02, 0.0116, 0.001])
@pytest.mark.parametrize("allowed", [0, 1, 3, 20])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_the_count_agrees_with_the_bound_it_promises(rate, allowed, confidence) -> None:
    # Counted without scipy (scenario validation needs it); the bound it promises is
    # scipy's Clopper-Pearson: the first n below the rate, and n - 1 not below it.
    n = required_measured(rate, allowed, confidence)
    assert upper_bound(allowed, n, confidence) < rate
    assert n == allowed + 1 or upper_bound(allowed, n - 1, confidence) >= rate


def _imports(statements: str, module: str) -> bool:
    """Whether `statements`, run in a fresh interpreter at the repository root, import
    `module`."""
    code = f"import sys; {statements}; print({module!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[4],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return out.strip() == "True"


def test_loading_a_scenario_does_not_import_scipy() -> None:
    # Every shard worker and `validate` load scenarios; scipy.stats alone takes ~0.6 s.
    assert not _imports("from loadgen.scenario import load_scenario; "
                        "load_scenario('scenarios/release-gate.toml')", "scipy")


def test_the_bounds_are_scipy_stats_clopper_pearson_to_the_last_bit() -> None:
    """The bounds come from the Beta quantile's special function, without importing
    scipy.stats: on generated counts, sizes and confidences, bit-identical to it."""
    import random

    from scipy.stats import beta

    rng = random.Random(5)
    for _ in range(1000):
        n = rng.choice([rng.randint(1, 50), rng.randint(51, 5000), rng.randint(5001, 10**6)])
        k = rng.randint(0, n - 1)
        c = rng.choice([0.8, 0.9, 0.95, 0.99, 0.999])
        assert upper_bound(k, n, c) == float(beta.ppf(c, k + 1, n - k)), (k, n, c)
        if k:
            assert lower_bound(k, n, c) == float(beta.ppf(1 - c, k, n - k + 1)), (k, n, c)
        assert detectable_rate(n, k, c) == float(beta.ppf(c, k + 1, n - k)), (k, n, c)


def test_a_bound_does_not_import_scipy_stats() -> None:
    assert not _imports("from loadgen.bounds import upper_bound; upper_bound(0, 256)",
                        "scipy.stats")


def test_the_smallest_rate_a_run_catches() -> None:
    # With 0 allowed, a server failing at the bound is caught 95% of the time.
    assert detectable_rate(256) == pytest.approx(upper_bound(0, 256))
    assert detectable_rate(1024, allowed=2) > detectable_rate(1024)
    assert detectable_rate(0) is None


def stats(measured: int, failing: int, infra: int = 0, interrupted: int = 0) -> PhaseStats:
    st = PhaseStats()
    st.requests = measured + interrupted
    st.interrupted = interrupted
    st.infra_errors = infra
    st.failing_seqs = set(range(failing))
    st.verdicts["stuck_in_reasoning"] = failing
    return st


def evaluate(cfg: GateConfig, st: PhaseStats | None, *, invalid: str | None = None,
             interrupted: str | None = None, receipts: list[dict[str, Any]] | None = None,
             ) -> GateResult:
    run = RunFacts(run_id="r", scenario="s", base_urls=["http://x"], invalid=invalid,
                   interrupted=interrupted)
    server = ServerFacts(receipts=ReceiptFacts.from_dicts(
        [tied(r) for r in receipts or []], endpoints=[EndpointStart("http://x", (START,))]),
        selection=ReceiptsSelection(receipts_dir="/receipts"))
    return gate_mod.evaluate(cfg, st, run, server)


def test_candidate_clean_passes_and_failing_fails() -> None:
    cfg = GateConfig(role="candidate", allowed=0, prove_below=0.05)
    ok = evaluate(cfg, stats(100, 0))
    assert (ok.passed, ok.exit_code, ok.failures) == (True, 0, 0)
    assert ok.prove_below == 0.05 and ok.required_measured == 59
    bad = evaluate(cfg, stats(100, 1))
    assert (bad.passed, bad.exit_code) == (False, 1)
    allowed = evaluate(GateConfig(role="candidate", allowed=1, prove_below=0.1), stats(100, 1))
    assert allowed.exit_code == 0


def test_a_clean_run_too_small_to_prove_the_rate_is_invalid() -> None:
    gate = evaluate(GateConfig(prove_below=0.003), stats(256, 0))
    assert gate.exit_code == 2
    assert any("998 are needed to prove a failure rate below 0.3%" in r for r in gate.reasons)


def test_no_default_lets_one_request_pass() -> None:
    assert GateConfig().required_measured() == 59
    assert evaluate(GateConfig(), stats(1, 0)).exit_code == 2
    with pytest.raises(ValueError, match="a candidate needs at least 59"):
        Scenario.model_validate({"load": {"measurement": 1}})


def test_control_passes_only_when_it_reproduces() -> None:
    cfg = GateConfig(role="control", allowed=0)
    assert evaluate(cfg, stats(64, 5)).exit_code == 0
    assert evaluate(cfg, stats(64, 0)).exit_code == 1
    assert evaluate(cfg, stats(64, 5)).prove_below is None


@pytest.mark.parametrize("kwargs,st,code", [
    ({"invalid": "server not ready"}, stats(0, 0), 2),
    ({"interrupted": "interrupted by SIGINT"}, stats(100, 0, interrupted=3), 130),
    ({}, stats(100, 0, infra=1), 2),
])
def test_invalid_runs(kwargs, st, code) -> None:
    assert evaluate(GateConfig(), st, **kwargs).exit_code == code


def test_infra_limit_is_settable() -> None:
    cfg = GateConfig(max_infra_errors=2)
    assert evaluate(cfg, stats(100, 0, infra=2)).exit_code == 0
    assert evaluate(cfg, stats(100, 0, infra=3)).exit_code == 2


# --------------------------------------------------------------------------- receipts


def receipt(pid: int, *, layout: str = "capacity", patched: bool = True, model: bool = True,
            c128a: int = 1, calls: int = 500, violations: int = 0, mode: str = "1",
            upstream: str = "prefix", hooks: dict | None = None,
            architectures: tuple[str, ...] = ("DeepseekV4ForCausalLM",)) -> dict[str, Any]:
    data: dict[str, Any] = {
        "file": f"h-{pid}.json", "pid": pid, "process": f"VLLM::proc{pid}", "layout": layout,
        "patched": patched, "upstream_variant": upstream, "vllm_version": "0.32.0",
        "guard": {"mode": mode, "calls": calls if model else 0,
                  "violations": violations if model else 0},
        "model": {"loaded": model, "architectures": list(architectures) if model else [],
                  "c128a_builders": c128a if model else 0,
                  "hooks": hooks or {"model_loader": "ok", "c128a_builders": "ok"}},
    }
    return data


API = receipt(1, model=False)  # the API server: loads the plugin, never the model


def receipts_gate(receipts: list[dict[str, Any]], **cfg: Any) -> GateResult:
    return evaluate(GateConfig(**{"require_receipts": True, **cfg}), stats(100, 0),
                    receipts=receipts)


def receipts_message(gate: GateResult) -> str:
    (check,) = [c for c in gate.checks if c.name.startswith("patch receipts")]
    return check.message


def test_capacity_and_prefix_in_the_model_processes_pass() -> None:
    gate = receipts_gate([API, receipt(2), receipt(3, layout="prefix")])
    assert gate.exit_code == 0
    assert "2 model process(es) ran capacity, prefix" in receipts_message(gate)


def test_packed_never_passes_as_a_candidate() -> None:
    gate = receipts_gate([API, receipt(2, layout="packed")])
    assert gate.exit_code == 1
    assert "packed C128A layout (the #52448 bug)" in receipts_message(gate)
    # Upstream's own builder on 0.27.x (layout off) is packed too, ...
    assert receipts_gate([receipt(2, layout="off", patched=False, upstream="packed")]
                         ).exit_code == 1
    # ... and so is a relaxed plugin that left 0.27's builder in place.
    assert receipts_gate([receipt(2, patched=False, upstream="packed")]).exit_code == 1
    # Even when the scenario does not require receipts, a packed one fails.
    assert receipts_gate([receipt(2, layout="packed")], require_receipts=False).exit_code == 1
    with pytest.raises(ValueError, match="never passes as a candidate"):
        GateConfig(accept_layouts=["packed"])


def test_only_the_model_processes_are_weighed() -> None:
    assert receipts_gate([receipt(1, model=False, layout="packed"), receipt(2)]).exit_code == 0


def test_a_layout_the_scenario_does_not_accept_fails() -> None:
    gate = receipts_gate([receipt(2, layout="prefix")], accept_layouts=["capacity"])
    assert gate.exit_code == 1 and "the scenario accepts capacity" in receipts_message(gate)


def test_upstreams_own_builder_counts_only_where_the_guard_vouches_for_it() -> None:
    off = {"layout": "off", "patched": False, "upstream": "capacity"}
    assert receipts_gate([receipt(2, **off)]).exit_code == 0
    assert receipts_gate([receipt(2, **off, violations=3)]).exit_code == 1
    assert receipts_gate([receipt(2, **off, calls=0)]).exit_code == 2
    assert receipts_gate([receipt(2, **off, mode="0")]).exit_code == 2
    # Builder calls the guard saw prove C128A layers even where no builder was counted:
    # the violations still fail the gate, never "the model has no C128A layers".
    gate = receipts_gate([receipt(2, **off, c128a=0, violations=3)])
    assert gate.exit_code == 1 and "left rows off the capacity stride" in receipts_message(gate)


@pytest.mark.parametrize("receipts,words", [
    ([], "no patch receipt found in /receipts"),
    ([API], "no receipt from a process that runs the model"),
    ([{"pid": 2, "layout": "capacity", "patched": True}], "before the model watch existed"),
    ([receipt(1, model=False, hooks={"model_loader": "cannot hook X", "c128a_builders": "ok"})],
     "model_loader: cannot hook X"),
    ([API, receipt(2, calls=0), receipt(3, calls=0)], "the C128A builder was not reached"),
    # The builder hook failed (a release renamed the class): no builder counted and no
    # call seen is not a model without C128A layers, it is a builder nobody watched.
    ([API, receipt(2, c128a=0, calls=0, hooks={
        "model_loader": "ok", "c128a_builders": "no class in m defines _build_c128a_metadata"})],
     "the model watch could not count C128A builders (VLLM::proc2 (pid 2): no class in m"),
    ([API, receipt(2), receipt(3, calls=0)], "no C128A builder call in VLLM::proc3 (pid 3)"),
    ([receipt(2, mode="0")], "the stride guard is off"),
])
def test_receipts_that_cannot_prove_it_make_the_run_invalid(receipts, words) -> None:
    gate = receipts_gate(receipts)
    assert gate.exit_code == 2
    assert words in receipts_message(gate)


def test_a_model_without_c128a_layers_rests_on_the_replies() -> None:
    gate = receipts_gate([API, receipt(2, c128a=0, calls=0, architectures=("Qwen3ForCausalLM",))])
    assert gate.exit_code == 0
    message = receipts_message(gate)
    assert "has no C128A layers" in message and "rests on the replies alone" in message
    # DeepSeek-V4 has C128A layers: none counted means they were missed, not absent.
    assert receipts_gate([API, receipt(2, c128a=0, calls=0)]).exit_code == 2


def test_without_receipts_and_not_required_the_gate_says_what_it_rests_on() -> None:
    gate = receipts_gate([], require_receipts=False)
    assert gate.exit_code == 0
    assert "the gate rests on the replies alone" in receipts_message(gate)


def test_a_control_reports_receipts_and_never_gates_on_them() -> None:
    cfg = {"role": "control", "require_receipts": True}
    gate = evaluate(GateConfig(**cfg), stats(64, 5), receipts=[receipt(2, layout="packed")])
    assert gate.exit_code == 0
    assert "ran packed" in receipts_message(gate)


def test_stride_violations_fail_a_clean_candidate() -> None:
    receipts = [receipt(2, violations=4)]
    gate = evaluate(GateConfig(fail_on_stride_violations=True), stats(100, 0),
                    receipts=receipts)
    assert gate.exit_code == 1
    assert any("4 violation" in r for r in gate.reasons)
    # Whatever the key says: violations in a candidate's model process fail it.
    assert evaluate(GateConfig(), stats(100, 0), receipts=receipts).exit_code == 1


def test_zero_stride_violations_pass_only_when_the_guard_saw_calls() -> None:
    cfg = GateConfig(fail_on_stride_violations=True)
    gate = evaluate(cfg, stats(100, 0), receipts=[receipt(2, calls=900)])
    assert gate.exit_code == 0
    (check,) = [c for c in gate.checks if "stride" in c.name]
    assert check.passed and "0 violation(s) in 900 guarded builder call(s)" in check.message
    gate = evaluate(cfg, stats(100, 0), receipts=[receipt(2, c128a=0, calls=0)])
    assert gate.exit_code == 2  # run invalid: nothing was watched
    assert any("no builder calls" in r for r in gate.reasons)
    assert evaluate(cfg, stats(100, 0)).exit_code == 2


# ------------------------------------------------------------------- spread and claim

def timeline(flags: list[bool]) -> list:
    from loadgen.judge.gate.aggregate import TimelinePoint

    return [TimelinePoint(seq, "x", 1, 0.0, failed) for seq, failed in enumerate(flags)]


def test_failures_that_start_late_are_not_spread_evenly() -> None:
    from loadgen.judge.gate.spread import failure_spread

    # #52448's shape: clean first, then failing.
    late = failure_spread(timeline([False] * 256 + [i % 3 == 0 for i in range(768)]))
    assert late.uneven and late.direction == "rising" and late.p_trend < 0.001
    assert "NOT spread evenly" in late.statement() and "this run's history only" in \
        late.statement()
    even = failure_spread(timeline([i % 20 == 0 for i in range(1024)]))
    assert not even.uneven and "spread evenly" in even.statement()
    assert failure_spread(timeline([False] * 64)).statement() == "no failure: nothing to spread"
    # The same records give the same p-values (a rebuilt report reads the same).
    flags = [i % 7 == 0 or i > 900 for i in range(1024)]
    assert failure_spread(timeline(flags)).p_uneven == failure_spread(timeline(flags)).p_uneven


def test_the_gate_says_what_a_pass_proves() -> None:
    st = stats(1024, 0)
    gate = evaluate(GateConfig(prove_below=0.003), st)
    assert gate.exit_code == 0
    assert "below 0.292% at 95% confidence, which proves it below 0.3%" in gate.statement
    assert "fail independently" in gate.statement and "history" in gate.statement
    assert gate.detectable_rate_95 == pytest.approx(0.00292, abs=1e-5)
    control = evaluate(GateConfig(role="control"), stats(64, 63))
    assert "reproduction rate is above 92" in control.statement


def test_upstreams_builder_in_an_unknown_release_cannot_be_vouched_for() -> None:
    off = {"layout": "off", "patched": False}
    gate = receipts_gate([receipt(2, **off, upstream="unknown")])
    assert gate.exit_code == 2 and "is unknown" in receipts_message(gate)
    # A known variant the scenario does not accept fails (prefix, when only capacity is).
    gate = receipts_gate([receipt(2, **off, upstream="prefix")], accept_layouts=["capacity"])
    assert gate.exit_code == 1 and "writes prefix" in receipts_message(gate)
