"""qualify.json and what every side-by-side page shows of a qualification.

One page states the one thing a release engineer needs: did the harness see the bug
on the control (and how surely), and what failure rate does the candidate's clean
run rule out. Both runs keep their full results directories next to these.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loadgen.bounds import describe_bound
from loadgen.judge.gate.difference import Difference
from loadgen.judge.gate.qualification import ModelCheck, Qualification, release_text
from loadgen.judge.gate.run_report import RunReport
from loadgen.report.facts_text import layout_text
from loadgen.results.qualification import ModelsChecked, QualificationFile, QualificationSide
from loadgen.results.schema import given, stamped
from loadgen.scenario import Role
from loadgen.targets.facts import model_identity


@dataclass(frozen=True)
class SideFacts:
    """What the side-by-side pages show of one run (qualify.json's `control`, `candidate`)."""

    results_dir: str
    role: Role
    exit_code: int
    passed: bool
    reasons: list[str]
    base_urls: list[str]
    c128a_layout: str | None
    layout: str
    vllm_versions: list[str]
    vllm_release: str
    model: str
    receipts: int
    fail_on: list[str]
    allowed: int
    measured: int
    failures: int
    failure_rate: float | None
    upper_bound_95: float | None
    lower_bound_95: float | None
    no_rate: str | None
    verdicts: dict[str, int]
    finish_reasons: dict[str, int]
    latency_s: dict[str, Any]
    completion_tokens: dict[str, Any] | None
    spec_acceptance_rate: float | None


def side_facts(report: RunReport, base: Path) -> SideFacts:
    gate = report.gate
    measurement = report.phase_summaries.get("measurement")
    measured, failures = gate.measured, gate.failures
    return SideFacts(
        results_dir=os.path.relpath(report.out_dir, base),
        role=Role(gate.role),
        exit_code=gate.exit_code,
        passed=gate.passed,
        reasons=list(gate.reasons),
        base_urls=list(report.run.base_urls),
        c128a_layout=report.server.layout,
        layout=layout_text(report.server),
        vllm_versions=report.server.vllm_versions,
        vllm_release=release_text(report),
        model=model_identity(report.run.model, report.server).describe(),
        receipts=len(report.server.receipts.processes),
        fail_on=list(gate.fail_on),
        allowed=gate.allowed,
        measured=measured,
        failures=failures,
        failure_rate=failures / measured if measured and not gate.no_rate else None,
        upper_bound_95=gate.upper_bound_95,
        lower_bound_95=gate.lower_bound_95,
        no_rate=gate.no_rate,
        verdicts=measurement.verdicts if measurement else {},
        finish_reasons=measurement.finish_reasons if measurement else {},
        latency_s=measurement.latency_s if measurement else {},
        completion_tokens=measurement.tokens.completion_per_request if measurement else None,
        spec_acceptance_rate=report.server.telemetry.total.spec_acceptance_rate,
    )


@dataclass(frozen=True)
class QualifyDocument:
    """A qualification as every page shows it; `to_dict` is qualify.json."""

    command: str
    scenario: str
    verdict: str
    exit_code: int
    passed: bool
    reasons: list[str]
    statements: list[str]
    models: ModelCheck | None
    control: SideFacts
    candidate: SideFacts | None
    #: The two-sample test that decided whether the candidate fails less than the control.
    difference: Difference | None = None
    #: The node the load generator ran for, and when the qualification started and
    #: ended (the control's start, the last side's end): what `fleet DIR` reads.
    node: str | None = None
    started: float | None = None
    finished: float | None = None

    @property
    def candidate_bound(self) -> str | None:
        c = self.candidate
        return (describe_bound(c.failures, c.measured)
                if c is not None and c.upper_bound_95 is not None else None)

    @property
    def difference_line(self) -> str | None:
        """Which test decided whether the candidate fails less often, and what it said."""
        return f"Difference: {self.difference.sentence()}." if self.difference else None

    @property
    def headline(self) -> str:
        """One sentence: the verdict and the two numbers behind it."""
        control, candidate = self.control, self.candidate
        parts = [f"{self.verdict} (exit {self.exit_code})"]
        if control.no_rate:
            parts.append(f"control: {control.no_rate}")
        elif control.measured and control.failures:
            parts.append(f"control: {control.failures} of {control.measured} reproduced "
                         f"the bug ({100 * (control.failure_rate or 0):.1f}%, > "
                         f"{100 * (control.lower_bound_95 or 0):.2f}% at 95% confidence)")
        elif control.measured:  # no reproduction: no bound to state
            parts.append(f"control: 0 of {control.measured} reproduced the bug")
        if candidate is not None and candidate.no_rate:
            parts.append(f"candidate: {candidate.no_rate}")
        elif candidate is not None and candidate.measured:
            parts.append(f"candidate: {describe_bound(candidate.failures, candidate.measured)}")
        elif candidate is None:
            parts.append("candidate: not run")
        if self.difference is not None:
            d = self.difference
            parts.append(f"difference: {d.test}, p = {d.p_value:.3g}"
                         + (" (proven)" if d.proven else " (not proven)"))
        if self.models is not None and not self.models.same and self.models.allowed:
            parts.append(self.statements[0])
        parts.append(f"control on {control.vllm_release}"
                     + (f", candidate on {candidate.vllm_release}" if candidate else ""))
        return "; ".join(parts)

    def to_file(self) -> QualificationFile:
        """qualify.json: the document, its two sides whole, and the figures a pipeline
        reads without opening a side."""
        control, candidate = self.control, self.candidate
        return QualificationFile(
            command=self.command, scenario=self.scenario, verdict=self.verdict,
            exit_code=self.exit_code, passed=self.passed, reasons=self.reasons,
            statements=self.statements,
            model=(ModelsChecked.model_validate(self.models.to_dict())
                   if self.models else None),
            control=QualificationSide.model_validate(asdict(control)),
            candidate=QualificationSide.model_validate(asdict(candidate)) if candidate else None,
            control_reproduction_rate=control.failure_rate,
            control_lower_bound_95=control.lower_bound_95,
            candidate_upper_bound_95=candidate.upper_bound_95 if candidate else None,
            candidate_bound=self.candidate_bound,
            difference=self.difference.to_dict() if self.difference else None,
            headline=self.headline,
            node=self.node, started=self.started, finished=self.finished,
        )

    def to_dict(self) -> dict[str, Any]:
        """qualify.json as written, before its figures are rounded."""
        return stamped(given(self.to_file(), mode="json"))


def qualify_document(q: Qualification) -> QualifyDocument:
    return QualifyDocument(
        command=q.command, scenario=q.scenario, verdict=q.verdict, exit_code=q.exit_code,
        passed=q.passed, reasons=list(q.reasons), statements=list(q.statements),
        models=q.models, control=side_facts(q.control, q.out_dir),
        candidate=side_facts(q.candidate, q.out_dir) if q.candidate is not None else None,
        difference=q.difference, node=q.control.run.node, started=q.control.run.started,
        finished=(q.candidate or q.control).run.finished)


def _pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _sec(latency: dict[str, Any], key: str, q: str) -> str:
    value = (latency.get(key) or {}).get(q)
    return "-" if value is None else f"{value:.3f}"


def comparison_rows(doc: QualifyDocument) -> list[tuple[str, str, str]]:
    """(label, control, candidate) rows shared by the markdown and the HTML page."""
    control, candidate = doc.control, doc.candidate

    def both(fn: Callable[[SideFacts], str]) -> tuple[str, str]:
        return fn(control), (fn(candidate) if candidate else "not run")

    def bound(s: SideFacts) -> str:
        if s.no_rate:
            return s.no_rate
        if s.role == Role.CONTROL:
            return (f"> {_pct(s.lower_bound_95)} (reproduction rate)" if s.failures
                    else "none: did not reproduce")
        if s.failures > s.allowed and s.lower_bound_95 is not None:
            return f"> {_pct(s.lower_bound_95)} (it failed: how often, at least)"
        return f"< {_pct(s.upper_bound_95)}"

    def tokens(s: SideFacts) -> str:
        t = s.completion_tokens
        return "-" if not t or t["p50"] is None else f"{t['p50']:.0f} / {t['max']:.0f}"

    return [
        ("gate", *both(lambda s: (f"{s.role}: fail on {', '.join(s.fail_on)}, "
                                  + ("must exceed" if s.role == Role.CONTROL else "allowed")
                                  + f" {s.allowed}"))),
        ("result", *both(lambda s: f"exit {s.exit_code}"
                         + (" (passed)" if s.passed else " (" + "; ".join(s.reasons) + ")"))),
        ("server(s)", *both(lambda s: ", ".join(s.base_urls) or "-")),
        ("C128A layout", *both(lambda s: s.layout)),
        ("model", *both(lambda s: s.model)),
        ("vLLM", *both(lambda s: s.vllm_release)),
        ("measured requests", *both(lambda s: str(s.measured))),
        ("gated failures", *both(lambda s: str(s.failures))),
        ("failure rate", *both(lambda s: _pct(s.failure_rate, 1))),
        ("95% bound", *both(bound)),
        ("TTFT p50 / p99 (s)", *both(lambda s: f"{_sec(s.latency_s, 'ttft', 'p50')} / "
                                     f"{_sec(s.latency_s, 'ttft', 'p99')}")),
        ("end-to-end p50 / p99 (s)", *both(lambda s: f"{_sec(s.latency_s, 'e2e', 'p50')} / "
                                           f"{_sec(s.latency_s, 'e2e', 'p99')}")),
        ("completion tokens p50 / max", *both(tokens)),
        ("spec-decode acceptance", *both(lambda s: _pct(s.spec_acceptance_rate, 1))),
        ("difference (candidate below control)", *_difference_cells(doc.difference)),
        ("results", *both(lambda s: s.results_dir + "/")),
    ]


def _difference_cells(tested: Difference | None) -> tuple[str, str]:
    if tested is None:
        return "-", "no test: a side has no failure rate"
    outcome = ("proven at 95%" if tested.proven else "NOT PROVEN"
               + (f" (about {tested.per_side_needed} per side would settle it)"
                  if tested.per_side_needed else ""))
    return tested.test, f"p = {tested.p_value:.3g}: {outcome}"


def verdict_rows(doc: QualifyDocument) -> list[tuple[str, int, int | None]]:
    control, candidate = doc.control, doc.candidate
    names = sorted(set(control.verdicts) | set(candidate.verdicts if candidate else {}))
    return [(n, control.verdicts.get(n, 0),
             (candidate.verdicts.get(n, 0) if candidate else None)) for n in names]
