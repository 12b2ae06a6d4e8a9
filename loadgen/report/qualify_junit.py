"""The qualification's junit.xml: one testcase per side's verdict, then each side's checks."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from loadgen.bounds import describe_bound
from loadgen.judge.qualification import Qualification


def render_qualify_junit(q: Qualification, doc: dict[str, Any]) -> bytes:
    classname = f"dsv4-qual.{doc.get('command') or 'qualify'}.{doc['scenario']}"
    suite = ET.Element("testsuite", {"name": classname})
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(name: str, outcome: str, message: str) -> None:
        el = ET.SubElement(suite, "testcase", {"classname": classname, "name": name})
        counts["tests"] += 1
        if outcome != "passed":
            ET.SubElement(el, outcome, {"message": message}).text = message
            counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[outcome]] += 1
        ET.SubElement(el, "system-out").text = message

    control = doc["control"]
    reproduced = control["exit_code"] == 0
    case("control reproduces the bug", "passed" if reproduced else "error",
         f"{control['failures']} of {control['measured']} measured requests failed with "
         f"{', '.join(control['fail_on'])}" + ("" if reproduced else
                                                ": " + "; ".join(doc["reasons"])))
    model = doc.get("model") or {}
    if doc["candidate"] is not None and model:
        same = model["same"]
        case("control and candidate serve the same model",
             "passed" if same or model["allowed"] else "error",
             "; ".join(doc.get("statements") or []) if same else
             "; ".join(model["differences"]) + (" (allowed by qualify.allow_different_models)"
                                                if model["allowed"] else ""))
    candidate = doc["candidate"]
    if candidate is None:
        case("candidate stays within its gate", "skipped",
             "not run: " + "; ".join(doc["reasons"]))
    else:
        outcome = {0: "passed", 1: "failure"}.get(candidate["exit_code"], "error")
        message = (describe_bound(candidate["failures"], candidate["measured"])
                   if candidate["measured"] else "no measured requests")
        case("candidate stays within its gate", outcome,
             message + ("" if outcome == "passed" else ": " + "; ".join(candidate["reasons"])))
    for side, report in (("control", q.control), ("candidate", q.candidate)):
        if report is None:
            continue
        for check in report.gate.checks:
            outcome = "passed" if check.passed else (
                "error" if check.kind == "error" else "failure")
            case(f"{side}: {check.name}", outcome, check.message)
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites", {"name": "dsv4-qual"})
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
