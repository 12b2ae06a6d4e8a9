"""The gate: does this run pass, and with which exit code.

A *candidate* passes when the gated failures stay within `allowed`; a *control*
(the positive control, a server with the bug left in) passes only when it
reproduces, i.e. exceeds `allowed`. Before either, the run must be valid: not
interrupted, the server was ready, infrastructure errors within their limit, enough
measured requests, the patch receipts present when the scenario requires them, and,
when it gates on stride violations, a stride guard that saw builder calls.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from loadgen.exit_codes import ExitCode
from loadgen.judge.aggregate import PhaseStats
from loadgen.judge.bounds import lower_bound, upper_bound
from loadgen.results import RunFacts
from loadgen.scenario import GateConfig
from loadgen.targets.facts import ServerFacts


@dataclass
class Check:
    """One gated check; junit.xml writes one testcase per check."""

    name: str
    passed: bool
    message: str
    kind: str = "failure"  # "failure" fails the gate, "error" makes the run invalid


@dataclass
class GateResult:
    role: str
    passed: bool
    failures: int
    allowed: int
    measured: int
    upper_bound_95: float | None
    lower_bound_95: float | None
    exit_code: int
    fail_on: list[str]
    infra_errors: int
    max_infra_errors: int
    min_measured: int
    reasons: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    per_verdict: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe_first_violation(first: dict[str, Any] | None) -> str:
    """One line a person can read: where the rows went and where a graph reads them."""
    if not first:
        return ""
    views = first.get("views") or ["decode"]
    view = views[0]
    return (f"builder call {first.get('call')}: {view} rows at stride "
            f"{first.get(f'{view}_row_stride')}, buffer row stride "
            f"{first.get(f'{view}_buffer_row_stride')} ({first.get('num_decode_tokens')} decode"
            f" + {first.get('num_prefill_tokens')} prefill tokens, width "
            f"{first.get('max_compressed_tokens')})")


def _stride_check(summary: dict[str, Any], role: str) -> Check:
    """Zero violations count only if the guard saw builder calls: a guard that was off,
    or receipts that were never read, must not pass the gate by saying nothing. For a
    control, violations are expected (the bug is left in): reported, not gated."""
    violations = int(summary.get("stride_violations") or 0)
    calls = int(summary.get("guard_calls") or 0)
    first = describe_first_violation(summary.get("first_violation"))
    if role == "control":
        return Check("C128A stride violations (control: expected)", passed=True,
                     message=f"{violations} violation(s) in {calls} guarded builder call(s)"
                     + (f"; first at {first}" if first else ""))
    if violations == 0 and calls == 0:
        return Check("no C128A stride violations", passed=False, kind="error",
                     message="the stride guard reported no builder calls (guard off, "
                             "receipts not read, or the builder never ran)")
    return Check(
        "no C128A stride violations", passed=violations == 0,
        message=f"{violations} violation(s) in {calls} guarded builder call(s)"
        + (f"; first at {first}" if first else ""),
        kind="failure")


def evaluate(cfg: GateConfig, stats: PhaseStats | None, run: RunFacts,
             server: ServerFacts) -> GateResult:
    """The gate's checks over the measurement phase, the run's facts and the server's."""
    st = stats or PhaseStats()
    interrupted, invalid = run.interrupted, run.invalid
    failures = len(st.failing_seqs)
    measured = st.measured
    per_verdict = {v: st.verdicts.get(v, 0) for v in cfg.fail_on}
    checks: list[Check] = []

    checks.append(Check("run completed",
                        passed=invalid is None and interrupted is None,
                        message=invalid or interrupted or "server ready, all phases ran",
                        kind="error"))
    checks.append(Check(
        f"infrastructure errors <= {cfg.max_infra_errors}",
        passed=st.infra_errors <= cfg.max_infra_errors,
        message=f"{st.infra_errors} http_error/timeout/stream_error in measurement",
        kind="error"))
    checks.append(Check(
        f"measured requests >= {cfg.min_measured}", passed=measured >= cfg.min_measured,
        message=f"{measured} measured", kind="error"))
    summary = server.receipts
    if cfg.require_receipts:
        count = summary.get("count") or 0
        patched = summary.get("patched")
        ok = count > 0 and (patched is True or cfg.role == "control")
        checks.append(Check(
            "patch receipts present", passed=ok,
            message=(f"{count} receipt(s), layouts {summary.get('layouts')}, "
                     f"patched={patched}") if count else "no patch receipt found",
            kind="error"))
    if cfg.fail_on_stride_violations:
        checks.append(_stride_check(summary, cfg.role))
    if cfg.role == "candidate":
        gate_ok = failures <= cfg.allowed
        message = f"{failures} of {measured} failed (allowed {cfg.allowed})"
        checks.append(Check(f"failures <= {cfg.allowed}", gate_ok, message))
    else:
        gate_ok = failures > cfg.allowed
        message = (f"{failures} of {measured} reproduced the bug (needs more than "
                   f"{cfg.allowed})")
        checks.append(Check(f"control reproduces (> {cfg.allowed} failures)", gate_ok, message))

    reasons = [c.message for c in checks if not c.passed]
    if interrupted:
        code = ExitCode.INTERRUPTED
    elif any(not c.passed and c.kind == "error" for c in checks):
        code = ExitCode.RUN_INVALID
    elif all(c.passed for c in checks):
        code = ExitCode.PASSED
    else:
        code = ExitCode.GATE_FAILED
    return GateResult(
        role=cfg.role, passed=code == ExitCode.PASSED, failures=failures,
        allowed=cfg.allowed, measured=measured,
        upper_bound_95=upper_bound(failures, measured),
        lower_bound_95=lower_bound(failures, measured), exit_code=int(code),
        fail_on=[str(v) for v in cfg.fail_on], infra_errors=st.infra_errors,
        max_infra_errors=cfg.max_infra_errors, min_measured=cfg.min_measured,
        reasons=reasons, checks=checks, per_verdict=per_verdict,
    )
