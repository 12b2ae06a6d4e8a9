"""The qualification's junit.xml: one testcase per side's verdict, then each side's checks."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from loadgen.bounds import describe_bound
from loadgen.exit_codes import ExitCode
from loadgen.judge.gate.checks import CheckKind
from loadgen.judge.gate.qualification import Qualification
from loadgen.report.qualify_doc import QualifyDocument


def render_qualify_junit(q: Qualification, doc: QualifyDocument) -> bytes:
    classname = f"dsv4-qual.{doc.command}.{doc.scenario}"
    suite = ET.Element("testsuite", {"name": classname})
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(name: str, outcome: str, message: str) -> None:
        el = ET.SubElement(suite, "testcase", {"classname": classname, "name": name})
        counts["tests"] += 1
        if outcome != "passed":
            ET.SubElement(el, outcome, {"message": message}).text = message
            counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[outcome]] += 1
        ET.SubElement(el, "system-out").text = message

    control = doc.control
    reproduced = control.exit_code == ExitCode.PASSED
    case("control reproduces the bug", "passed" if reproduced else "error",
         f"{control.failures} of {control.measured} measured requests failed with "
         f"{', '.join(control.fail_on)}" + ("" if reproduced else
                                            ": " + "; ".join(doc.reasons)))
    models = doc.models
    if doc.candidate is not None and models is not None:
        case("control and candidate serve the same model",
             "passed" if models.same or models.allowed else "error",
             "; ".join(doc.statements) if models.same else
             "; ".join(models.differences) + (" (allowed by qualify.allow_different_models)"
                                              if models.allowed else ""))
    candidate = doc.candidate
    if candidate is None:
        case("candidate stays within its gate", "skipped",
             "not run: " + "; ".join(doc.reasons))
    else:
        outcome = {ExitCode.PASSED: "passed", ExitCode.GATE_FAILED: "failure"}.get(
            ExitCode(candidate.exit_code), "error")
        message = (describe_bound(candidate.failures, candidate.measured)
                   if candidate.measured else "no measured requests")
        case("candidate stays within its gate", outcome,
             message + ("" if outcome == "passed" else ": " + "; ".join(candidate.reasons)))
    if candidate is not None:
        tested = doc.difference
        case("candidate fails less often than the control (" + (tested.test if tested else
                                                                   "no test") + ")",
             "passed" if tested is not None and tested.proven else "error",
             tested.sentence() if tested is not None else "a side has no failure rate")
    for side, report in (("control", q.control), ("candidate", q.candidate)):
        if report is None:
            continue
        for check in report.gate.checks:
            outcome = ("skipped" if check.skipped else "passed") if check.passed else (
                "error" if check.kind == CheckKind.ERROR else "failure")
            case(f"{side}: {check.name}", outcome, check.message)
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites", {"name": "dsv4-qual"})
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
