"""The gate: does this run pass, and with which exit code.

A *candidate* passes when the gated failures stay within `allowed` over enough
measured requests to prove the scenario's rate (`prove_below`: the exact 95% upper
bound must fall below it, so the count it takes is derived, never left at 1), its
patch receipts prove what the model ran (`receipt_rules`), and speculative decoding
accepts as much under load as alone (when a reference phase ran). A *control* (the
server with the bug left in) passes only when it reproduces, i.e. exceeds `allowed`.
Before either, the run must be valid: not interrupted, the server ready, the priming
answered by the model (a warm-up that never reached it warmed nothing), infrastructure
errors within their limit, and the receipts readable where they must be.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

from loadgen.bounds import detectable_rate, lower_bound, upper_bound
from loadgen.exit_codes import ExitCode
from loadgen.judge.gate.aggregate import PhaseStats
from loadgen.judge.gate.answer_stats import CheckedAnswers
from loadgen.judge.gate.checks import Check, CheckKind
from loadgen.judge.gate.coverage import (
    answers_statement,
    retries_statement,
    reuse_check,
    reuse_statement,
)
from loadgen.judge.gate.receipt_rules import receipts_check, receipts_statement, stride_check
from loadgen.judge.gate.spread import FailureSpread, failure_spread
from loadgen.judge.run_level.reference import ReferenceSummary
from loadgen.load_claim import LoadClaim, describe
from loadgen.run_facts import RunFacts
from loadgen.scenario import GateConfig, ReferenceConfig, Role
from loadgen.targets.facts import ServerFacts
from loadgen.targets.telemetry_summary import PrefixReuse
from loadgen.taxonomy import FAILURE_VERDICTS, OPT_IN


@dataclass
class GateResult:
    role: Role
    passed: bool
    failures: int
    allowed: int
    #: Measured requests the rate is of: those the model answered (`replies`).
    measured: int
    upper_bound_95: float | None
    lower_bound_95: float | None
    exit_code: int
    fail_on: list[str]  # what this gate counted (`GateConfig.gated`)
    infra_errors: int
    max_infra_errors: int
    required_measured: int
    prove_below: float | None  # candidates: the rate a pass proves, else None
    detectable_rate_95: float | None  # the smallest rate this run's size catches 95% of the time
    reasons: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    per_verdict: dict[str, int] = field(default_factory=dict)
    spread: FailureSpread = field(default_factory=FailureSpread)  # by request order
    statement: str = ""  # what this run proves, in words
    #: Verdicts the measured replies carry that this gate did not count: name -> replies.
    not_gated: dict[str, int] = field(default_factory=dict)
    #: What the scenario's `gate.ignore` named.
    ignored: list[str] = field(default_factory=list)
    #: Why there is no failure rate to bound ("not ready, nothing sent", "no reply came
    #: from the model"...); every report shows these words in place of counts and bounds.
    no_rate: str | None = None
    #: Checks that could not be made (`Check.skipped`): "name: why", for every report.
    not_checked: list[str] = field(default_factory=list)
    #: The measured replies whose answer was checked exactly, and how they fared.
    answers: CheckedAnswers | None = None
    #: The server's prefix cache during the measurement, where it says.
    prefix_cache: PrefixReuse | None = None

    def to_dict(self) -> dict[str, Any]:
        """summary.json's `gate`: every field, the spread with its verdict and sentence."""
        doc = {**asdict(self), "spread": self.spread.to_dict()}
        doc["answers"] = self.answers.to_dict() if self.answers is not None else None
        doc["prefix_cache"] = self.prefix_cache.to_dict() if self.prefix_cache else None
        return doc


@dataclass
class GateContext:
    """What the gate weighs besides the measurement phase."""

    priming: PhaseStats | None = None
    priming_planned: int = 0
    reference: ReferenceConfig = field(default_factory=ReferenceConfig)
    #: Speculative decoding per phase (`telemetry_summary.phase_acceptance`), pooled...
    acceptance: dict[str, dict[str, float]] = field(default_factory=dict)
    #: ...and per server (`telemetry_summary.acceptance_by_server`).
    acceptance_by_server: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: Requests sent in every phase, and how many of them the model answered (None:
    #: only the measurement is known).
    sent: int | None = None
    answered: int | None = None
    #: The reference phase's statistics and the reference rule's summary (its oracles).
    reference_stats: PhaseStats | None = None
    reference_summary: ReferenceSummary | None = None
    #: The server's prefix cache over each phase (`ServerFacts.prefix_cache`), and
    #: whether the workload shares prefixes (sessions, needles in one filler).
    prefix_cache: dict[str, PrefixReuse] = field(default_factory=dict)
    asks_reuse: bool = False


#: What a run without a rate to bound says instead (`no_rate`).
NOT_READY = "not ready, nothing sent"
NOTHING_SENT = "nothing sent"
NO_REPLY = "no reply came from the model"
NOTHING_MEASURED = "nothing measured"
NO_MEASURED_REPLY = "no measured reply came from the model"


def replies(st: PhaseStats) -> int:
    """Requests of a phase that the model answered: neither an infrastructure error nor
    interrupted."""
    return st.requests - st.infra_errors - st.interrupted


def no_rate(run: RunFacts, st: PhaseStats, context: GateContext) -> str | None:
    """Why this run has no failure rate to bound, in a few words (None: it has one).

    A bound over requests that never got a reply reads as evidence about the model
    ("RUN INVALID: 0/256 failed, rate < 1.16% @95%" of a run whose every request got
    HTTP 400); a "0/0 failed" of a server that never became ready reads as a run that
    measured nothing by choice. The reports say what happened instead."""
    sent = context.sent if context.sent is not None else st.requests
    if sent == 0:
        not_ready = len(run.ready) < len(run.base_urls) and run.interrupted is None
        return NOT_READY if not_ready else NOTHING_SENT
    answered = context.answered if context.answered is not None else replies(st)
    if answered == 0:
        return NO_REPLY
    if st.measured == 0:
        return NOTHING_MEASURED
    if replies(st) == 0:
        return NO_MEASURED_REPLY
    return None


def priming_check(cfg: GateConfig, context: GateContext) -> Check:
    """The warm-up must have reached the model: a gateway that answered it with errors
    would leave a cold server to be measured, where the bug of a warm one hides."""
    planned = context.priming_planned
    if planned <= 0:
        return Check("priming reached the model", True, "no priming asked of this run",
                     kind=CheckKind.ERROR)
    st = context.priming or PhaseStats()
    answered = replies(st)
    ok = st.infra_errors <= cfg.max_infra_errors and answered >= planned - cfg.max_infra_errors
    return Check(f"priming reached the model (infrastructure errors <= {cfg.max_infra_errors})",
                 ok, f"{answered} of {planned} priming requests answered by the model, "
                 f"{st.infra_errors} http_error/timeout/stream_error"
                 + ("" if ok else ": the server was not warmed up as the scenario requires"),
                 kind=CheckKind.ERROR)


#: Tokens a phase must generate before a drafter that drafted none of them is stuck.
STUCK_DRAFTER_TOKENS = 64


def impossible_spec_counters(by_server: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Where the server's spec-decode counters cannot be true: more tokens accepted than
    drafted, or than generated (an accepted draft token is a generated one)."""
    found = []
    for url, phases in sorted(by_server.items()):
        for phase, c in sorted(phases.items()):
            who = f"{url + ' ' if url else ''}{phase}"
            accepted, drafted, generated = c.get("accepted"), c.get("drafted"), c.get("generated")
            if isinstance(accepted, int | float) and isinstance(drafted, int | float) \
                    and accepted > drafted:
                found.append(f"{who}: {accepted:g} accepted of {drafted:g} drafted")
            elif isinstance(accepted, int | float) and isinstance(generated, int | float) \
                    and accepted > generated:
                found.append(f"{who}: {accepted:g} accepted, {generated:g} generated")
    return found


def acceptance_check(context: GateContext) -> Check | None:
    """Speculative decoding must not collapse under load (#51009: acceptance length 1.46
    of 5): its acceptance rate in the measurement against the reference phase's, on every
    server and every engine a server's /metrics counts apart (one collapsing replica
    must not hide in a pooled ratio; a server whose own reference replies drafted
    nothing is held to the pooled rate alone). A drafter that accepted none of its drafts
    alone is broken before any load: that fails too, never a ratio of zero to zero; so
    does one that stopped drafting while the server generated. The check passes exactly
    when every ratio it states reaches the one it needs. Counters that cannot be true
    (more accepted than drafted or generated) make the run invalid: nothing can be
    judged from them. A counter that went down mid-phase (a restart) is counted across
    and said."""
    if context.reference.requests <= 0:
        return None
    ratio = context.reference.min_acceptance_ratio
    name = f"spec-decode acceptance under load >= {ratio:g} x alone"
    pooled_alone = context.acceptance.get("reference") or {}
    resets = [f"{url}'s spec-decode counters went down {c['resets']} time(s) during the "
              f"{phase} (a restart): counted across, as Prometheus's increase() does"
              for url, phases in sorted(context.acceptance_by_server.items())
              for phase, c in sorted(phases.items()) if c.get("resets")]
    broken = impossible_spec_counters(context.acceptance_by_server)
    if broken:
        return Check(name, False, "the server's spec-decode counters are impossible ("
                     + "; ".join(broken) + "): acceptance under load cannot be judged",
                     kind=CheckKind.ERROR)
    stuck = [f"{url or 'the server'} drafted nothing in the measurement while it generated "
             f"{c['generated']:g} tokens (speculative decoding stopped drafting)"
             for url, phases in sorted(context.acceptance_by_server.items())
             if (c := phases.get("measurement") or {}).get("drafted") == 0
             and (c.get("generated") or 0) >= STUCK_DRAFTER_TOKENS]
    if stuck:
        return Check(name, False, "; ".join(stuck))
    compared: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for url, phases in sorted(context.acceptance_by_server.items()):
        loaded = phases.get("measurement") or {}
        alone = phases.get("reference") or {}
        if alone.get("acceptance") is None:
            alone = pooled_alone
        if loaded.get("acceptance") is not None and alone.get("acceptance") is not None:
            compared.append((url, loaded, alone))
    if not compared:
        pooled = (context.acceptance.get("reference") or {},
                  context.acceptance.get("measurement") or {})
        if pooled[0].get("acceptance") is None or pooled[1].get("acceptance") is None:
            return Check(name, True, "; ".join([
                "no speculative-decoding metrics in both the reference phase and the "
                "measurement: nothing to compare", *resets]), skipped=True)
        compared = [("", dict(pooled[1]), dict(pooled[0]))]

    def holds(loaded: dict[str, Any], alone: dict[str, Any]) -> bool:
        # Exact (rational) arithmetic: no rounding passes 0.349 of 0.7, and no underflow
        # passes zero against a tiny rate alone.
        base = Fraction(float(alone["acceptance"]))
        return base > 0 and Fraction(float(loaded["acceptance"])) >= Fraction(ratio) * base

    def shown_ratio(loaded: dict[str, Any], alone: dict[str, Any]) -> str:
        """Two decimals that never read as enough when it is not (0.4986 is 0.49)."""
        value = float(loaded["acceptance"]) / float(alone["acceptance"])
        if value > 99:  # a rate alone next to nothing: the ratio says little more
            return ">99"
        if holds(loaded, alone) or round(value, 2) < ratio:
            return f"{value:.2f}"
        return f"{math.floor(value * 100) / 100:.2f}"

    def said(url: str, loaded: dict[str, Any], alone: dict[str, Any]) -> str:
        named = url and len(compared) > 1  # one server needs no name
        who = url + ": " if named else ""
        base, under = float(alone["acceptance"]), float(loaded["acceptance"])
        if base <= 0:
            drafted = alone.get("drafted")
            of = f" of {drafted:g} drafted tokens" if isinstance(drafted, int | float) else ""
            return (f"{who}acceptance {base:.3f} alone: none{of} accepted before any load, "
                    f"{under:.3f} under load (speculative decoding is not working; "
                    f"needs {ratio:g} of a working rate)")
        return (f"{who}acceptance {under:.3f} under load, {base:.3f} alone "
                f"(ratio {shown_ratio(loaded, alone)}, needs {ratio:g})")

    failing = [c for c in compared if not holds(c[1], c[2])]
    shown = failing or compared
    message = "; ".join([*(said(*c) for c in shown), *resets])
    if failing and len(compared) > 1:
        message = (f"{len(failing)} of {len(compared)} servers collapse under load: "
                   + message)
    return Check(name, not failing, message)


def reference_checks(cfg: GateConfig, context: GateContext) -> list[Check]:
    """The same server alone (the reference phase): its replies are judged as any other
    (a server that fails alone fails), and the phase must have left an oracle; a
    reference phase with none compared nothing and proves nothing (invalid)."""
    if context.reference.requests <= 0:
        return []
    st = context.reference_stats or PhaseStats()
    failed = len(st.failing_seqs)
    answered = replies(st)
    summary = context.reference_summary
    oracles = summary.oracles if summary is not None else 0
    unusable = summary.unusable if summary is not None else {}
    why = "; ".join(sorted({str(v) for v in unusable.values()})) or "no solo reply came"
    return [
        Check(f"reference phase: the server alone fails <= {cfg.allowed}",
              failed <= cfg.allowed,
              f"{failed} of {answered} solo replies failed"
              + (f" ({_counts(st, cfg)})" if failed else "")),
        Check(f"reference phase: infrastructure errors <= {cfg.max_infra_errors}",
              st.infra_errors <= cfg.max_infra_errors,
              f"{st.infra_errors} http_error/timeout/stream_error among {st.requests} solo "
              "requests", kind=CheckKind.ERROR),
        # No oracle because the server failed alone is that failure (the check above);
        # no oracle because no solo reply came leaves the run unable to say: invalid.
        Check("reference phase: a usable oracle", oracles > 0,
              f"{oracles} of {st.requests} solo replies can be held to"
              + ("" if oracles else f": none is usable ({why}), so no loaded reply was "
                 "compared with the server alone"),
              kind=CheckKind.FAILURE if failed else CheckKind.ERROR),
    ]


def _counts(st: PhaseStats, cfg: GateConfig) -> str:
    gated = {str(v) for v in cfg.gated()}
    return ", ".join(f"{name} {count}" for name, count in sorted(st.verdicts.items())
                     if name in gated)


def evaluate(cfg: GateConfig, stats: PhaseStats | None, run: RunFacts,
             server: ServerFacts, context: GateContext | None = None) -> GateResult:
    """The gate's checks over the measurement phase, the run's facts and the server's."""
    st = stats or PhaseStats()
    context = context or GateContext()
    failures = len(st.failing_seqs)
    gated = [str(v) for v in cfg.gated()]
    not_gated = {name: count for name, count in sorted(st.verdicts.items())
                 if count and name not in gated and name in _JUDGEMENTS}
    # A rate is of replies: a request the model never answered (an infrastructure error,
    # within its own limit) is no evidence that it answers right, so it is not counted
    # as a request that passed (it would tighten the bound with nothing behind it).
    measured = replies(st)
    candidate = cfg.role == Role.CANDIDATE
    needed = cfg.required_measured()
    completed = Check("run completed", run.invalid is None and run.interrupted is None,
                      run.invalid or run.interrupted or "server ready, all phases ran",
                      kind=CheckKind.ERROR)
    checks = [
        completed,
        priming_check(cfg, context),
        Check(f"infrastructure errors <= {cfg.max_infra_errors}",
              st.infra_errors <= cfg.max_infra_errors,
              f"{st.infra_errors} http_error/timeout/stream_error in measurement",
              kind=CheckKind.ERROR),
        # A measurement the model never answered proves nothing, whatever the limit on
        # infrastructure errors allowed: invalid, never a pass of "0 failed".
        Check(f"measured requests >= {needed}", measured >= needed and measured > 0,
              f"{measured} measured" + (
                  f" ({st.measured} sent, {st.infra_errors} of them not answered by the "
                  "model: http_error/timeout/stream_error, not counted)"
                  if st.infra_errors else "")
              + (f"; {needed} are needed to prove a failure rate below "
                 f"{100 * cfg.prove_below:g}% at 95% with {cfg.allowed} allowed"
                 if candidate else ""), kind=CheckKind.ERROR),
        receipts_check(cfg, server.receipts, server.selection.receipts_dir, measured,
                       server.selection.receipts_dir_state),
    ]
    if cfg.fail_on_stride_violations:
        checks.append(stride_check(server.receipts, cfg.role))
    reuse = context.prefix_cache.get("measurement")
    if cfg.require_prefix_reuse:
        checks.append(reuse_check(reuse))
    acceptance = acceptance_check(context) if candidate else None
    if acceptance is not None:
        checks.append(acceptance)
    if candidate:
        checks += reference_checks(cfg, context)
    if candidate:
        checks.append(Check(f"failures <= {cfg.allowed}", failures <= cfg.allowed,
                            f"{failures} of {measured} failed (allowed {cfg.allowed})"))
    else:
        checks.append(Check(f"control reproduces (> {cfg.allowed} failures)",
                            failures > cfg.allowed,
                            f"{failures} of {measured} reproduced the bug (needs more than "
                            f"{cfg.allowed})"))
    failed = [c for c in checks if not c.passed]
    if not completed.passed:  # a run that did not complete: the rest follows from that
        failed = [completed]
    reasons = [c.message for c in failed]
    spread = failure_spread(st.timeline)
    if run.interrupted:
        code = ExitCode.INTERRUPTED
    elif any(not c.passed and c.kind == CheckKind.ERROR for c in checks):
        code = ExitCode.RUN_INVALID
    elif all(c.passed for c in checks):
        code = ExitCode.PASSED
    else:
        code = ExitCode.GATE_FAILED
    without = no_rate(run, st, context)
    upper, lower = upper_bound(failures, measured), lower_bound(failures, measured)
    answers = st.checked_answers()
    detectable = detectable_rate(measured, cfg.allowed)
    if without is not None:  # no reply to bound a rate with
        upper = lower = detectable = None
    return GateResult(
        role=cfg.role, passed=code == ExitCode.PASSED, failures=failures,
        allowed=cfg.allowed, measured=measured,
        upper_bound_95=upper, lower_bound_95=lower, exit_code=int(code),
        fail_on=gated, infra_errors=st.infra_errors,
        max_infra_errors=cfg.max_infra_errors, required_measured=needed,
        prove_below=cfg.prove_below if candidate else None,
        detectable_rate_95=detectable,
        reasons=reasons, checks=checks,
        per_verdict={v: st.verdicts.get(v, 0) for v in gated},
        spread=spread,
        statement=" ".join(filter(None, (
            f"{without[0].upper()}{without[1:]}: this run proves nothing." if without else
            statement(cfg, failures, measured, upper, lower, detectable, spread,
                      run.load),
            None if without or not st.infra_errors else
            f"{st.infra_errors} further measured request(s) got no reply from the model "
            f"(infrastructure errors, within the limit of {cfg.max_infra_errors}) and are "
            "not counted in the rate.",
            None if without else answers_statement(answers, measured),
            reuse_statement(reuse, context.asks_reuse),
            retries_statement(st.transport_retries),
            receipts_statement(cfg, server.receipts),
            not_gated_statement(not_gated, cfg)))),
        no_rate=without, not_gated=not_gated, ignored=[str(v) for v in cfg.ignore],
        not_checked=[f"{c.name}: {c.message}" for c in checks if c.passed and c.skipped],
        answers=answers if without is None else None, prefix_cache=reuse,
    )


#: Verdicts that judge a reply's output (what a gate may count or leave out).
_JUDGEMENTS = frozenset(v.value for v in (*FAILURE_VERDICTS, *OPT_IN))


def not_gated_statement(not_gated: dict[str, int], cfg: GateConfig) -> str | None:
    """Every verdict the measured replies carry that the gate did not count, and why:
    a reader must never take a pass for "nothing was detected"."""
    if not not_gated:
        return None
    ignored = {str(v) for v in cfg.ignore}

    def why(name: str) -> str:
        if name in ignored:
            return "ignored by gate.ignore"
        if cfg.role == Role.CONTROL:
            return "a control counts only what reproduces the bug"
        return "a signal, gated only when gate.fail_on names it"

    by_reason: dict[str, list[str]] = {}
    for name, count in not_gated.items():
        by_reason.setdefault(why(name), []).append(f"{name} {count}")
    parts = [f"{', '.join(names)} ({reason})" for reason, names in by_reason.items()]
    return f"Detected but not gated: {'; '.join(parts)}."


def _pct(rate: float) -> str:
    return f"{100 * rate:.3g}%"


def statement(cfg: GateConfig, failures: int, measured: int, upper: float | None,
              lower: float | None, detectable: float | None, spread: FailureSpread,
              load: LoadClaim | None = None) -> str:
    """What the run proves, in the words a release manager reads (report, summary)."""
    if not measured:
        return "Nothing was measured: this run proves nothing."
    under = f"under this load ({describe(load.effective)})" if load else "under this load"
    weakened = f" {load.sentence()}" if load and load.changed else ""
    if cfg.role == "control":
        if not failures:  # a rate above 0% is no finding: say what happened instead
            return (f"0 of {measured} measured requests reproduced the bug {under}: the "
                    "control did not reproduce it." + weakened)
        return (f"{failures} of {measured} measured requests reproduced the bug {under}: the "
                f"reproduction rate is above {_pct(lower or 0.0)} at 95% confidence."
                + weakened)
    assert upper is not None
    proved = (f"which proves it below {_pct(cfg.prove_below)} as the scenario asks"
              if upper < cfg.prove_below else
              f"which does NOT prove it below {_pct(cfg.prove_below)} as the scenario asks")
    parts = [f"{failures} of {measured} measured requests failed the gate: the failure rate "
             f"{under} is below {_pct(upper)} at 95% confidence, {proved}."]
    if weakened:
        parts.append(weakened.strip())
    if detectable is not None:
        parts.append(f"A server failing {_pct(detectable)} of these requests would have "
                     f"been caught with 95% probability.")
    parts.append("This assumes requests fail independently of each other; failures that "
                 "grow with the server's history (#52448's came after ~256 clean requests) "
                 "are covered only as far as this run's history reaches.")
    if spread.failures:  # not str.capitalize(): it would lower the sentence's "NOT"
        said = spread.statement()
        parts.append(f"{said[:1].upper()}{said[1:]}.")
    return " ".join(parts)
