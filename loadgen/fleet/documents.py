"""The fleet verdict for whoever scheduled it: JSON, Markdown, JUnit and a console table.

JUnit has one testcase per node (a CI's test view then lists the nodes, the failed ones
first in its summary); a node that did not report is a failure, never a skip.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from loadgen.fleet.verdict import STATE_WORDS, FleetVerdict, NodeState, NodeVerdict

#: What a node's row shows of the round it rests on (round column -> heading).
ROUND_FACTS = (("vllm_version", "vLLM"), ("image", "image"), ("gpu_name", "GPU"),
               ("c128a_layout", "layout"))


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _round_name(n: NodeVerdict) -> str:
    if n.round is None:
        return "-"
    return f"{n.round.get('soak_id')} #{n.round.get('round')}"


def fleet_json(v: FleetVerdict) -> dict[str, Any]:
    def node(n: NodeVerdict) -> dict[str, Any]:
        r = n.round or {}
        return {"node": n.node, "state": str(n.state), "passed": n.passed,
                "expected": n.expected, "why": n.why,
                "round": None if n.round is None else {
                    "soak_id": r.get("soak_id"), "round": r.get("round"),
                    "started": r.get("started"), "ended": r.get("ended"),
                    "exit_code": r.get("exit_code"), "measured": r.get("measured"),
                    "gated_failures": r.get("gated_failures"), "note": r.get("note"),
                    "results_dir": r.get("results_dir"),
                    **{key: r.get(key) for key, _ in ROUND_FACTS}}}

    return {"scenario": v.scenario, "since": v.since, "until": v.until,
            "expected_from": v.expected_from, "filters": v.filters,
            "exit_code": int(v.exit_code), "statement": v.statement(),
            "nodes": [node(n) for n in v.nodes]}


def fleet_markdown(v: FleetVerdict) -> str:
    lines = [f"# Fleet verdict: {v.scenario or 'every scenario'}", "",
             f"**{v.statement()}** (exit {int(v.exit_code)})", "",
             f"Window: rounds started {_when(v.since)} to {_when(v.until)}; expected: "
             f"{v.expected_from}."]
    if v.filters:
        lines.append("Filters: " + ", ".join(f"{k} = {val}" for k, val in v.filters.items())
                     + ".")
    lines += ["", "| node | state | why | round | ended | "
              + " | ".join(h for _, h in ROUND_FACTS) + " |",
              "|---|---|---|---|---|" + "---|" * len(ROUND_FACTS)]
    for n in v.nodes:
        r = n.round or {}
        facts = " | ".join(str(r.get(key) or "-") for key, _ in ROUND_FACTS)
        name = n.node if n.expected else f"{n.node} (not named)"
        lines.append(f"| {name} | {STATE_WORDS[n.state]} | {n.why} | {_round_name(n)} | "
                     f"{_when(r.get('ended'))} | {facts} |")
    lines += ["", "A node passes only on its last finished round in the window, valid and "
              "within its gate; no round in the window is a failure, never a pass."]
    return "\n".join(lines) + "\n"


def fleet_junit(v: FleetVerdict) -> bytes:
    classname = f"dsv4-qual.fleet.{v.scenario or 'all'}"
    suite = ET.Element("testsuite", {"name": classname})
    counts = {"tests": 0, "failures": 0, "errors": 0}
    for n in v.nodes:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": n.node})
        counts["tests"] += 1
        message = f"{STATE_WORDS[n.state]}: {n.why}"
        if n.state == NodeState.RUNNING:
            ET.SubElement(case, "error", {"message": message}).text = message
            counts["errors"] += 1
        elif n.failed:
            ET.SubElement(case, "failure", {"message": message}).text = message
            counts["failures"] += 1
        ET.SubElement(case, "system-out").text = f"{message}; round {_round_name(n)}"
    if not v.nodes:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": "fleet"})
        ET.SubElement(case, "error", {"message": v.statement()}).text = v.statement()
        counts["tests"] += 1
        counts["errors"] += 1
    suite.attrib.update({k: str(val) for k, val in counts.items()})
    ET.indent(suite)
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)


def fleet_table(v: FleetVerdict) -> Table:
    table = Table(title=v.statement(), title_justify="left")
    for heading in ("node", "state", "why", "round", "ended", *(h for _, h in ROUND_FACTS)):
        table.add_column(heading, overflow="fold")
    style = {NodeState.PASSED: "green", NodeState.RUNNING: "yellow"}
    for n in v.nodes:
        r = n.round or {}
        table.add_row(n.node if n.expected else f"{n.node} (not named)",
                      f"[{style.get(n.state, 'red')}]{STATE_WORDS[n.state]}[/]", n.why,
                      _round_name(n), _when(r.get("ended")),
                      *(str(r.get(key) or "-") for key, _ in ROUND_FACTS))
    return table
