"""Every check of the gate says what it decided: on generated runs (zeros, missing
values, boundaries, every kind of receipt and counter), each check's pass or fail agrees
with the numbers its own sentence states against the threshold its own name states, and
the run's exit code, reasons and statement agree with its checks.

A check the gate grows without a rule here fails `test_every_check_has_a_rule`: a new
check must say how its words are held to its result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.exit_codes import ExitCode
from loadgen.judge.gate import gate as gate_mod
from loadgen.judge.gate.aggregate import PhaseStats
from loadgen.judge.gate.checks import Check, CheckKind
from loadgen.judge.gate.gate import GateContext, GateResult
from loadgen.judge.run_level.reference import ReferenceSummary
from loadgen.run_facts import RunFacts
from loadgen.scenario import GateConfig, ReferenceConfig
from loadgen.targets.facts import ServerFacts
from loadgen.targets.receipts import EndpointStart, ReceiptFacts, ReceiptsSelection
from loadgen.targets.telemetry_summary import PrefixReuse
from tests.loadgen.judge.gate.test_gate_mutants import START, receipt, stats

NUMBER = r"(\d[\d,]*(?:\.\d+)?)"


def num(text: str) -> float:
    return float(text.replace(",", ""))


def first(pattern: str, message: str) -> tuple[float, ...]:
    found = re.search(pattern, message)
    assert found, f"{pattern!r} not in {message!r}"
    return tuple(num(g) for g in found.groups())


def threshold(name: str) -> float:
    (value,) = first(r"(?:<=|>=|>) " + NUMBER, name)
    return value


# ----------------------------------------------------------- one rule per check


def _completed(check: Check, run: RunFacts) -> None:
    assert check.passed is (run.invalid is None and run.interrupted is None)
    if not check.passed:
        assert check.message in (run.invalid, run.interrupted)
    assert check.kind == CheckKind.ERROR


def _priming(check: Check, cfg: GateConfig) -> None:
    if check.message == "no priming asked of this run":
        assert check.passed
        return
    answered, planned, infra = first(NUMBER + r" of " + NUMBER + r" priming requests answered"
                                     r" by the model, " + NUMBER + " http_error", check.message)
    limit = threshold(check.name)
    assert limit == cfg.max_infra_errors
    assert check.passed is (infra <= limit and answered >= planned - limit)
    assert ("not warmed up" in check.message) is (not check.passed)


def _at_most(pattern: str) -> Callable[[Check], None]:
    def rule(check: Check) -> None:
        (count, *_) = first(pattern, check.message)
        assert check.passed is (count <= threshold(check.name)), check
    return rule


def _measured(check: Check) -> None:
    (count,) = first(r"^" + NUMBER + " measured", check.message)
    assert check.passed is (count >= threshold(check.name) and count > 0), check
    assert check.kind == CheckKind.ERROR


def _failures(check: Check, cfg: GateConfig) -> None:
    failed, _, allowed = first(NUMBER + " of " + NUMBER + r" failed \(allowed " + NUMBER,
                               check.message)
    assert allowed == threshold(check.name) == cfg.allowed
    assert check.passed is (failed <= allowed)


def _reproduces(check: Check, cfg: GateConfig) -> None:
    failed, _, needs = first(NUMBER + " of " + NUMBER + r" reproduced the bug \(needs more "
                             r"than " + NUMBER, check.message)
    assert needs == threshold(check.name) == cfg.allowed
    assert check.passed is (failed > needs)


def _oracle(check: Check) -> None:
    (oracles,) = first("^" + NUMBER + " of", check.message)
    assert check.passed is (oracles > 0)
    assert ("none is usable" in check.message) is (not check.passed)


def _reuse(check: Check) -> None:
    assert check.kind == CheckKind.ERROR
    if "exports no prefix-cache counters" in check.message:
        assert not check.passed
        return
    hits, _ = first("^" + NUMBER + " of " + NUMBER + " prompt tokens", check.message)
    assert check.passed is (hits > 0)
    assert ("not exercised" in check.message) is (not check.passed)


def _stride(check: Check) -> None:
    if "control" in check.name:
        assert check.passed
        return
    if "reported no builder calls" in check.message:
        assert not check.passed and check.kind == CheckKind.ERROR
        return
    violations, calls = first("^" + NUMBER + r" violation\(s\) in " + NUMBER, check.message)
    assert calls > 0
    assert check.passed is (violations == 0)


#: Words a receipts check uses only when the builder the server ran was not shown right.
_RECEIPT_FAULTS = ("packed", "violation", "accepts", "layout")


def _receipts(check: Check, cfg: GateConfig) -> None:
    if "control" in check.name:
        assert check.passed
        return
    if check.passed:
        # A pass that could not look must say so, and be marked as such or said plainly.
        looked = not any(w in check.message for w in ("no patch receipt", "not checked"))
        assert looked or "replies alone" in check.message or check.skipped, check
        assert looked or not cfg.require_receipts, check
        assert not re.search(r"ran the packed|guard counted", check.message), check
    else:
        # A failure names what is wrong: the run cannot be judged (invalid), or the
        # builder ran a layout or wrote rows the scenario refuses.
        assert "and no violation" not in check.message, check
        assert check.kind == CheckKind.ERROR or any(
            w in check.message for w in _RECEIPT_FAULTS), check


_RATIO = re.compile(r"\(ratio (>?)" + NUMBER + r", needs " + NUMBER + r"\)")
_NONE_ALONE = "accepted before any load"


def _acceptance(check: Check) -> None:
    if check.kind == CheckKind.ERROR:
        assert not check.passed and "impossible" in check.message
        return
    if "drafted nothing in the measurement" in check.message:
        assert not check.passed
        return
    if "nothing to compare" in check.message:
        assert check.passed and check.skipped, check  # never read as a ratio that held
        return
    said = [(num(a), num(b), bool(more)) for more, a, b in _RATIO.findall(check.message)]
    assert said or _NONE_ALONE in check.message, check
    if check.passed:
        # Every ratio stated reaches what it needs: the words never read as short.
        assert all(a >= b for a, b, _ in said) and _NONE_ALONE not in check.message, check
    else:
        # ...and a failure states a ratio short of it, or a drafter dead alone.
        assert any(a < b and not more for a, b, more in said) or \
            _NONE_ALONE in check.message, check


def rule_for(name: str) -> Callable[..., None] | None:
    rules: list[tuple[str, Callable[..., None]]] = [
        (r"^run completed$", _completed),
        (r"^priming reached the model", _priming),
        (r"^infrastructure errors <= \d+$", _at_most("^" + NUMBER + " http_error")),
        (r"^reference phase: infrastructure errors <= \d+$", _at_most("^" + NUMBER +
                                                                      " http_error")),
        (r"^reference phase: the server alone fails <= \d+$",
         _at_most("^" + NUMBER + " of " + NUMBER + " solo replies failed")),
        (r"^reference phase: a usable oracle$", _oracle),
        (r"^measured requests >= \d+$", _measured),
        (r"^failures <= \d+$", _failures),
        (r"^control reproduces \(> \d+ failures\)$", _reproduces),
        (r"^prefix cache reused$", _reuse),
        (r"C128A stride violations", _stride),
        (r"^patch receipts", _receipts),
        (r"^spec-decode acceptance", _acceptance),
    ]
    for pattern, rule in rules:
        if re.search(pattern, name):
            return rule
    return None


# ------------------------------------------------------------------- generated runs


@dataclass
class Run:
    cfg: GateConfig
    stats: PhaseStats
    facts: RunFacts
    server: ServerFacts
    context: GateContext


def _receipts_of(kind: str) -> list[dict[str, Any]]:
    if kind == "none":
        return []
    if kind == "packed":
        return [{**receipt(1), "layout": "packed"}]
    if kind == "violations":
        return [receipt(1, violations=3)]
    if kind == "no calls":
        return [receipt(1, calls=0)]
    return [receipt(1)]


def _counters(draw: st.DrawFn) -> dict[str, Any]:
    drafted = draw(st.sampled_from([0, 0.0, 1, 7, 70, 700]))
    accepted = draw(st.sampled_from([0, 1, 5, 35, 70, 700, 1000]))
    generated = draw(st.sampled_from([None, 0, 10, 64, 2000]))
    return {"drafted": drafted, "accepted": accepted, "generated": generated,
            "acceptance": accepted / drafted if drafted else None,
            "resets": draw(st.sampled_from([0, 0, 1]))}


@st.composite
def runs(draw: st.DrawFn) -> Run:
    role = draw(st.sampled_from(["candidate", "control"]))
    reference = draw(st.sampled_from([0, 0, 4]))
    cfg = GateConfig(role=role, allowed=draw(st.integers(0, 3)),
                     max_infra_errors=draw(st.integers(0, 3)),
                     prove_below=draw(st.sampled_from([0.01, 0.05, 0.1, 0.3])),
                     require_receipts=draw(st.booleans()),
                     require_prefix_reuse=draw(st.booleans()),
                     fail_on_stride_violations=draw(st.booleans()))
    measured = draw(st.sampled_from([0, 1, 2, 28, 58, 59, 60, 300]))
    failing = draw(st.integers(0, measured))
    infra = draw(st.integers(0, min(4, measured - failing)))
    phase = stats(measured, failing, infra=infra, interrupted=draw(st.integers(0, 2)))
    end = draw(st.sampled_from([{}, {}, {"invalid": "server not ready after 600 s"},
                                {"interrupted": "interrupted by SIGINT"}]))
    ready = draw(st.sampled_from([[{"url": "http://x"}], []]))
    facts = RunFacts(run_id="r", scenario="s", base_urls=["http://x"], ready=ready, **end)
    dir_state = draw(st.sampled_from([None, None, "missing"]))
    server = ServerFacts(receipts=ReceiptFacts.from_dicts(
        _receipts_of(draw(st.sampled_from(["none", "ok", "packed", "violations", "no calls"]))),
        endpoints=[EndpointStart("http://x", (START,))]),
        selection=ReceiptsSelection(receipts_dir=draw(st.sampled_from([None, "/receipts"])),
                                    receipts_dir_state=dir_state))
    planned = draw(st.sampled_from([0, 1, 8]))
    priming = stats(draw(st.integers(0, planned)), infra=0)
    priming.infra_errors = draw(st.integers(0, priming.requests))
    ref_stats = stats(reference, draw(st.integers(0, reference)))
    oracles = draw(st.integers(0, reference))
    summary = draw(st.sampled_from([None, ReferenceSummary(
        solo_replies=reference, oracles=oracles, unusable={} if oracles else {"b": "failed alone"},
        compared=0, verifiable_mismatches=0, identical=0, texts_compared=0, similarity={},
        reasoning_similarity={}, batch_invariant=False, per_request=[])]))
    by_server = {url: {"measurement": _counters(draw), "reference": _counters(draw)}
                 for url in draw(st.sampled_from([[], ["a"], ["a", "b"]]))}
    reuse = draw(st.sampled_from([None, PrefixReuse(0, 0), PrefixReuse(1000, 0),
                                  PrefixReuse(1000, 1)]))
    pooled = {phase: {"acceptance": c["acceptance"]} for phase, c in
              (by_server.get("a") or {}).items() if c["acceptance"] is not None}
    context = GateContext(priming=priming, priming_planned=planned,
                          reference=ReferenceConfig(requests=reference,
                                                    min_acceptance_ratio=draw(
                                                        st.sampled_from([0.25, 0.5, 1.0]))),
                          acceptance=pooled, acceptance_by_server=by_server,
                          reference_stats=ref_stats, reference_summary=summary,
                          prefix_cache={"measurement": reuse} if reuse else {},
                          asks_reuse=draw(st.booleans()))
    return Run(cfg, phase, facts, server, context)


def evaluate(run: Run) -> GateResult:
    return gate_mod.evaluate(run.cfg, run.stats, run.facts, run.server, run.context)


@settings(max_examples=600, deadline=None)
@given(run=runs())
def test_every_check_says_what_it_decided(run: Run) -> None:
    result = evaluate(run)
    for check in result.checks:
        rule = rule_for(check.name)
        assert rule is not None, f"no consistency rule for the check {check.name!r}"
        params = rule.__code__.co_varnames[:rule.__code__.co_argcount]
        rule(check, *[{"cfg": run.cfg, "run": run.facts}[p] for p in params[1:]])


@settings(max_examples=600, deadline=None)
@given(run=runs())
def test_the_exit_code_reasons_and_statement_follow_the_checks(run: Run) -> None:
    result = evaluate(run)
    failed = [c for c in result.checks if not c.passed]
    if run.facts.interrupted:
        assert result.exit_code == ExitCode.INTERRUPTED
    elif any(c.kind == CheckKind.ERROR for c in failed):
        assert result.exit_code == ExitCode.RUN_INVALID
    elif failed:
        assert result.exit_code == ExitCode.GATE_FAILED
    else:
        assert result.exit_code == ExitCode.PASSED
    assert result.passed is (result.exit_code == ExitCode.PASSED)
    assert set(result.reasons) <= {c.message for c in failed}
    assert bool(result.reasons) is bool(failed)
    # A rate is stated only where there are replies to state it of.
    if result.no_rate is not None:
        assert result.upper_bound_95 is None and result.lower_bound_95 is None
        assert "proves nothing" in result.statement
    else:
        assert result.measured > 0
        assert result.upper_bound_95 is not None and result.lower_bound_95 is not None
        rate = Fraction(result.failures, result.measured)
        assert result.lower_bound_95 <= rate <= result.upper_bound_95
        assert result.statement.startswith(f"{result.failures} of {result.measured} ")
    # "proves it below" only where the bound is below what the scenario asks.
    if "which proves it below" in result.statement:
        assert result.upper_bound_95 is not None and result.prove_below is not None
        assert result.upper_bound_95 < result.prove_below
    if result.passed and run.cfg.role == "candidate":
        assert "which proves it below" in result.statement


def test_every_check_has_a_rule() -> None:
    """The generated runs reach every check the gate makes (so each has a rule above):
    a check only some inputs make would otherwise go unheld."""
    seen: set[str] = set()
    for run in _exemplars():
        for check in evaluate(run).checks:
            assert rule_for(check.name) is not None, check.name
            seen.add(re.sub(r"\b\d+\b", "N", check.name))
    wanted = {"run completed", "priming reached the model (infrastructure errors <= N)",
              "infrastructure errors <= N", "measured requests >= N",
              "patch receipts prove the C128A builder",
              "no C128A stride violations", "prefix cache reused", "failures <= N",
              "control reproduces (> N failures)", "reference phase: a usable oracle",
              "reference phase: infrastructure errors <= N",
              "reference phase: the server alone fails <= N"}
    assert wanted <= seen, wanted - seen
    assert any(name.startswith("spec-decode acceptance") for name in seen), seen


def _exemplars() -> list[Run]:
    base = runs()
    found: list[Run] = []

    @settings(max_examples=300, deadline=None, database=None)
    @given(run=base)
    def collect(run: Run) -> None:
        found.append(run)

    collect()
    return found
