"""The qualification's own reports: qualify.json, report.md, junit.xml, report.html.

One page states the one thing a release engineer needs: did the harness see the bug
on the control (and how surely), and what failure rate does the candidate's clean
run rule out. Both runs keep their full results directories next to these.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadgen.judge.bounds import describe_bound
from loadgen.report.build import write_atomic, write_json
from loadgen.report.markdown import layout_text

if TYPE_CHECKING:
    from loadgen.commands.run import RunOutcome

QUALIFY_FILE = "qualify.json"


def side_facts(outcome: RunOutcome | None, base: Path) -> dict[str, Any] | None:
    """What the side-by-side pages show of one run, taken from its summary.json."""
    if outcome is None:
        return None
    s = outcome.summary
    gate = s["gate"]
    target = s.get("target") or {}
    measurement = (s.get("phases") or {}).get("measurement") or {}
    measured, failures = gate["measured"], gate["failures"]
    return {
        "results_dir": os.path.relpath(outcome.out_dir, base),
        "role": gate["role"],
        "exit_code": gate["exit_code"],
        "passed": gate["passed"],
        "reasons": gate["reasons"],
        "base_urls": target.get("base_urls") or [],
        "c128a_layout": target.get("c128a_layout"),
        "layout": layout_text(target),
        "vllm_versions": target.get("vllm_versions") or target.get("server_versions") or [],
        "receipts": (target.get("receipts") or {}).get("count", 0),
        "fail_on": gate["fail_on"],
        "allowed": gate["allowed"],
        "measured": measured,
        "failures": failures,
        "failure_rate": failures / measured if measured else None,
        "upper_bound_95": gate["upper_bound_95"],
        "lower_bound_95": gate["lower_bound_95"],
        "verdicts": measurement.get("verdicts") or {},
        "finish_reasons": measurement.get("finish_reasons") or {},
        "latency_s": measurement.get("latency_s") or {},
        "completion_tokens": (measurement.get("tokens") or {}).get("completion_per_request"),
        "spec_acceptance_rate": ((s.get("telemetry") or {}).get("total") or {}).get(
            "spec_acceptance_rate"),
    }


def headline(doc: dict[str, Any]) -> str:
    """One sentence: the verdict and the two numbers behind it."""
    control, candidate = doc["control"], doc["candidate"]
    parts = [f"{doc['verdict']} (exit {doc['exit_code']})"]
    if control and control["measured"]:
        lb = control["lower_bound_95"]
        parts.append(f"control: {control['failures']} of {control['measured']} reproduced "
                     f"the bug ({100 * control['failure_rate']:.1f}%, > "
                     f"{100 * (lb or 0):.2f}% at 95% confidence)")
    if candidate and candidate["measured"]:
        parts.append(f"candidate: {describe_bound(candidate['failures'], candidate['measured'])}")
    elif candidate is None:
        parts.append("candidate: not run")
    return "; ".join(parts)


def write_qualify_reports(out_dir: Path, scenario: str, code: int, word: str,
                          reasons: list[str], control: RunOutcome,
                          candidate: RunOutcome | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "scenario": scenario,
        "verdict": word,
        "exit_code": code,
        "passed": code == 0,
        "reasons": reasons,
        "control": side_facts(control, out_dir),
        "candidate": side_facts(candidate, out_dir),
    }
    c, k = doc["control"], doc["candidate"]
    doc["control_reproduction_rate"] = c["failure_rate"]
    doc["control_lower_bound_95"] = c["lower_bound_95"]
    doc["candidate_upper_bound_95"] = k["upper_bound_95"] if k else None
    doc["candidate_bound"] = (describe_bound(k["failures"], k["measured"])
                              if k and k["measured"] else None)
    doc["headline"] = headline(doc)
    write_json(out_dir / QUALIFY_FILE, doc)
    write_atomic(out_dir / "report.md", render_markdown(doc).encode())
    write_junit(out_dir / "junit.xml", doc, control, candidate)
    from loadgen.report.qualify_html import write_qualify_html

    write_qualify_html(out_dir / "report.html", doc, control, candidate)
    return doc


def _pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _sec(latency: dict[str, Any], key: str, q: str) -> str:
    value = (latency.get(key) or {}).get(q)
    return "-" if value is None else f"{value:.3f}"


def comparison_rows(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, control, candidate) rows shared by the markdown and the HTML page."""
    c, k = doc["control"], doc["candidate"]

    def both(fn: Any) -> tuple[str, str]:
        return fn(c), (fn(k) if k else "not run")

    rows = [
        ("gate", *both(lambda s: (f"{s['role']}: fail on {', '.join(s['fail_on'])}, "
                                  + ("must exceed" if s["role"] == "control" else "allowed")
                                  + f" {s['allowed']}"))),
        ("result", *both(lambda s: f"exit {s['exit_code']}"
                         + (" (passed)" if s["passed"] else " (" + "; ".join(s["reasons"]) + ")"))),
        ("server(s)", *both(lambda s: ", ".join(s["base_urls"]) or "-")),
        ("C128A layout", *both(lambda s: s["layout"])),
        ("vLLM", *both(lambda s: ", ".join(s["vllm_versions"]) or "-")),
        ("measured requests", *both(lambda s: str(s["measured"]))),
        ("gated failures", *both(lambda s: str(s["failures"]))),
        ("failure rate", *both(lambda s: _pct(s["failure_rate"], 1))),
        ("95% bound", *both(lambda s: (f"> {_pct(s['lower_bound_95'])} (reproduction rate)"
                                       if s["role"] == "control"
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
    return rows


def verdict_rows(doc: dict[str, Any]) -> list[tuple[str, int, int | None]]:
    c, k = doc["control"], doc["candidate"]
    names = sorted(set(c["verdicts"]) | set((k or {}).get("verdicts") or {}))
    return [(n, c["verdicts"].get(n, 0), (k["verdicts"].get(n, 0) if k else None))
            for n in names]


def render_markdown(doc: dict[str, Any]) -> str:
    lines = [f"# dsv4-qual qualify: {doc['scenario']}", "", f"**{doc['headline']}**", ""]
    lines += [f"- {r}" for r in doc["reasons"]]
    lines += ["", "| | control | candidate |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in comparison_rows(doc)]
    lines += ["", "| verdict (measured) | control | candidate |", "|---|---:|---:|"]
    lines += [f"| {n} | {a} | {'-' if b is None else b} |" for n, a, b in verdict_rows(doc)]
    tail = (", `candidate/report.md`." if doc["candidate"]
            else " (the candidate was not run).")
    lines += ["", "Each side's full report: `control/report.md`" + tail]
    return "\n".join(lines) + "\n"


def write_junit(path: Path, doc: dict[str, Any], control: RunOutcome,
                candidate: RunOutcome | None) -> None:
    """One testcase per side's verdict, then each side's gate checks."""
    suite = ET.Element("testsuite", {"name": f"dsv4-qual.qualify.{doc['scenario']}"})
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    classname = f"dsv4-qual.qualify.{doc['scenario']}"

    def case(name: str, outcome: str, message: str) -> None:
        el = ET.SubElement(suite, "testcase", {"classname": classname, "name": name})
        counts["tests"] += 1
        if outcome != "passed":
            ET.SubElement(el, outcome, {"message": message}).text = message
            counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[outcome]] += 1
        ET.SubElement(el, "system-out").text = message

    c = doc["control"]
    reproduced = c["exit_code"] == 0
    case("control reproduces the bug", "passed" if reproduced else "error",
         f"{c['failures']} of {c['measured']} measured requests failed with "
         f"{', '.join(c['fail_on'])}" + ("" if reproduced else
                                          ": " + "; ".join(doc["reasons"])))
    k = doc["candidate"]
    if k is None:
        case("candidate stays within its gate", "skipped",
             "not run: the control did not reproduce the bug")
    else:
        outcome = {0: "passed", 1: "failure"}.get(k["exit_code"], "error")
        message = (describe_bound(k["failures"], k["measured"]) if k["measured"]
                   else "no measured requests")
        case("candidate stays within its gate", outcome,
             message + ("" if outcome == "passed" else ": " + "; ".join(k["reasons"])))
    for side, run in (("control", control), ("candidate", candidate)):
        if run is None:
            continue
        for check in run.summary["gate"].get("checks") or []:
            outcome = "passed" if check["passed"] else (
                "error" if check.get("kind") == "error" else "failure")
            case(f"{side}: {check['name']}", outcome, check["message"])
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites", {"name": "dsv4-qual"})
    root.append(suite)
    ET.indent(root)
    path.write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))
