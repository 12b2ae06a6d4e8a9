"""junit.xml: one testcase per gated check, so any CI (Buildkite, Jenkins, GitLab)
shows which check failed without reading our formats."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from loadgen.exit_codes import ExitCode
from loadgen.judge.gate.checks import CheckKind
from loadgen.judge.gate.run_report import RunReport
from loadgen.load_claim import describe
from loadgen.report.run_text import load_claim
from loadgen.scenario import Role


def render_junit(report: RunReport) -> bytes:
    scenario, gate, duration_s = report.scenario.name, report.gate, report.run.duration_s
    suite = ET.Element("testsuite", {
        "name": f"dsv4-qual.{scenario}",
        "tests": str(len(gate.checks) + len(gate.per_verdict)),
        "failures": "0", "errors": "0", "skipped": "0",
        "time": f"{duration_s or 0.0:.3f}",
    })
    failures = errors = 0
    classname = f"dsv4-qual.{scenario}.{gate.role}"
    claim = load_claim(report)
    if claim is not None:
        props = ET.SubElement(suite, "properties")
        for name, values in (("load.effective", claim.effective), ("load.shipped", claim.shipped)):
            ET.SubElement(props, "property", {"name": name, "value": describe(values)})
        # The scenario's claim as shipped: not tested when the load was weakened.
        case = ET.SubElement(suite, "testcase", {"classname": classname,
                                                 "name": "load as the scenario ships it"})
        if claim.weakened:
            ET.SubElement(case, "skipped", {"message": claim.sentence()})
        ET.SubElement(case, "system-out").text = claim.sentence() or describe(claim.effective)
        suite.set("tests", str(int(suite.get("tests", "0")) + 1))
        suite.set("skipped", "1" if claim.weakened else "0")
    skipped = int(suite.get("skipped", "0"))
    for check in gate.checks:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": check.name})
        if check.passed and check.skipped:
            ET.SubElement(case, "skipped", {"message": check.message})
            skipped += 1
        if not check.passed:
            tag = "error" if check.kind == CheckKind.ERROR else "failure"
            ET.SubElement(case, tag, {"message": check.message}).text = check.message
            if tag == "error":
                errors += 1
            else:
                failures += 1
        ET.SubElement(case, "system-out").text = check.message
    # A candidate's gate breaks down by verdict: each gated verdict is a testcase that
    # fails when the gate failed and this verdict contributed to it.
    for verdict, count in gate.per_verdict.items():
        case = ET.SubElement(suite, "testcase",
                             {"classname": classname, "name": f"verdict {verdict}"})
        message = f"{count} measured request(s) with {verdict}"
        if gate.role == Role.CANDIDATE and not gate.passed and gate.exit_code == \
                ExitCode.GATE_FAILED and count:
            ET.SubElement(case, "failure", {"message": message}).text = message
            failures += 1
        ET.SubElement(case, "system-out").text = message
    suite.set("skipped", str(skipped))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    root = ET.Element("testsuites", {"name": "dsv4-qual"})
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
