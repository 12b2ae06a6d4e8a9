"""qualify.json and what every side-by-side page shows of a qualification.

One page states the one thing a release engineer needs: did the harness see the bug
on the control (and how surely), and what failure rate does the candidate's clean
run rule out. Both runs keep their full results directories next to these.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from loadgen.bounds import describe_bound
from loadgen.judge.qualification import Qualification, release_text
from loadgen.judge.run_report import RunReport
from loadgen.report.facts_text import layout_text
from loadgen.targets.facts import model_identity


def side_facts(report: RunReport | None, base: Path) -> dict[str, Any] | None:
    """What the side-by-side pages show of one run."""
    if report is None:
        return None
    gate = report.gate
    measurement = report.phase_summaries.get("measurement", {})
    measured, failures = gate.measured, gate.failures
    return {
        "results_dir": os.path.relpath(report.out_dir, base),
        "role": gate.role,
        "exit_code": gate.exit_code,
        "passed": gate.passed,
        "reasons": gate.reasons,
        "base_urls": report.run.base_urls,
        "c128a_layout": report.server.layout,
        "layout": layout_text(report.server),
        "vllm_versions": report.server.vllm_versions,
        "vllm_release": release_text(report),
        "model": model_identity(report.run.model, report.server).describe(),
        "receipts": len(report.server.receipts.processes),
        "fail_on": gate.fail_on,
        "allowed": gate.allowed,
        "measured": measured,
        "failures": failures,
        "failure_rate": failures / measured if measured and not gate.no_rate else None,
        "upper_bound_95": gate.upper_bound_95,
        "lower_bound_95": gate.lower_bound_95,
        "no_rate": gate.no_rate,
        "verdicts": measurement.get("verdicts") or {},
        "finish_reasons": measurement.get("finish_reasons") or {},
        "latency_s": measurement.get("latency_s") or {},
        "completion_tokens": (measurement.get("tokens") or {}).get("completion_per_request"),
        "spec_acceptance_rate": (report.server.telemetry.get("total") or {}).get(
            "spec_acceptance_rate"),
    }


def headline(doc: dict[str, Any]) -> str:
    """One sentence: the verdict and the two numbers behind it."""
    control, candidate = doc["control"], doc["candidate"]
    parts = [f"{doc['verdict']} (exit {doc['exit_code']})"]
    if control and control.get("no_rate"):
        parts.append(f"control: {control['no_rate']}")
    elif control and control["measured"] and control["failures"]:
        lb = control["lower_bound_95"]
        parts.append(f"control: {control['failures']} of {control['measured']} reproduced "
                     f"the bug ({100 * control['failure_rate']:.1f}%, > "
                     f"{100 * (lb or 0):.2f}% at 95% confidence)")
    elif control and control["measured"]:  # no reproduction: no bound to state
        parts.append(f"control: 0 of {control['measured']} reproduced the bug")
    if candidate and candidate.get("no_rate"):
        parts.append(f"candidate: {candidate['no_rate']}")
    elif candidate and candidate["measured"]:
        parts.append(f"candidate: {describe_bound(candidate['failures'], candidate['measured'])}")
    elif candidate is None:
        parts.append("candidate: not run")
    model = doc.get("model") or {}
    if model and not model["same"] and model["allowed"]:
        parts.append(doc["statements"][0])
    parts.append(f"control on {control['vllm_release']}"
                 + (f", candidate on {candidate['vllm_release']}" if candidate else ""))
    return "; ".join(parts)


def qualify_document(q: Qualification) -> dict[str, Any]:
    """qualify.json."""
    doc: dict[str, Any] = {
        "command": q.command,
        "scenario": q.scenario,
        "verdict": q.verdict,
        "exit_code": q.exit_code,
        "passed": q.passed,
        "reasons": q.reasons,
        "statements": q.statements,
        "model": q.models.to_dict() if q.models else None,
        "control": side_facts(q.control, q.out_dir),
        "candidate": side_facts(q.candidate, q.out_dir),
    }
    control, candidate = doc["control"], doc["candidate"]
    doc["control_reproduction_rate"] = control["failure_rate"]
    doc["control_lower_bound_95"] = control["lower_bound_95"]
    doc["candidate_upper_bound_95"] = candidate["upper_bound_95"] if candidate else None
    doc["candidate_bound"] = (describe_bound(candidate["failures"], candidate["measured"])
                              if candidate and candidate["upper_bound_95"] is not None
                              else None)
    doc["headline"] = headline(doc)
    return doc


def _pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _sec(latency: dict[str, Any], key: str, q: str) -> str:
    value = (latency.get(key) or {}).get(q)
    return "-" if value is None else f"{value:.3f}"


def comparison_rows(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, control, candidate) rows shared by the markdown and the HTML page."""
    control, candidate = doc["control"], doc["candidate"]

    def both(fn: Any) -> tuple[str, str]:
        return fn(control), (fn(candidate) if candidate else "not run")

    return [
        ("gate", *both(lambda s: (f"{s['role']}: fail on {', '.join(s['fail_on'])}, "
                                  + ("must exceed" if s["role"] == "control" else "allowed")
                                  + f" {s['allowed']}"))),
        ("result", *both(lambda s: f"exit {s['exit_code']}"
                         + (" (passed)" if s["passed"] else " (" + "; ".join(s["reasons"]) + ")"))),
        ("server(s)", *both(lambda s: ", ".join(s["base_urls"]) or "-")),
        ("C128A layout", *both(lambda s: s["layout"])),
        ("model", *both(lambda s: s["model"])),
        ("vLLM", *both(lambda s: s["vllm_release"])),
        ("measured requests", *both(lambda s: str(s["measured"]))),
        ("gated failures", *both(lambda s: str(s["failures"]))),
        ("failure rate", *both(lambda s: _pct(s["failure_rate"], 1))),
        ("95% bound", *both(lambda s: (
            s["no_rate"] if s.get("no_rate") else
            (f"> {_pct(s['lower_bound_95'])} (reproduction rate)" if s["failures"]
             else "none: did not reproduce") if s["role"] == "control"
            else f"< {_pct(s['upper_bound_95'])}"))),
        ("TTFT p50 / p99 (s)", *both(lambda s: f"{_sec(s['latency_s'], 'ttft', 'p50')} / "
                                     f"{_sec(s['latency_s'], 'ttft', 'p99')}")),
        ("end-to-end p50 / p99 (s)", *both(lambda s: f"{_sec(s['latency_s'], 'e2e', 'p50')} / "
                                           f"{_sec(s['latency_s'], 'e2e', 'p99')}")),
        ("completion tokens p50 / max", *both(
            lambda s: "-" if not s["completion_tokens"] or s["completion_tokens"]["p50"] is None
            else f"{s['completion_tokens']['p50']:.0f} / {s['completion_tokens']['max']:.0f}")),
        ("spec-decode acceptance", *both(lambda s: _pct(s["spec_acceptance_rate"], 1))),
        ("results", *both(lambda s: s["results_dir"] + "/")),
    ]


def verdict_rows(doc: dict[str, Any]) -> list[tuple[str, int, int | None]]:
    control, candidate = doc["control"], doc["candidate"]
    names = sorted(set(control["verdicts"]) | set((candidate or {}).get("verdicts") or {}))
    return [(n, control["verdicts"].get(n, 0),
             (candidate["verdicts"].get(n, 0) if candidate else None)) for n in names]
