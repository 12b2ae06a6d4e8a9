"""The fleet verdict for whoever scheduled it: JSON, Markdown, JUnit and a console table.

JUnit has one testcase per node (a CI's test view then lists the nodes, the failed ones
first in its summary); a node that did not report is a failure, never a skip.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from loadgen.fleet.verdict import STATE_WORDS, FleetVerdict, NodeState, NodeVerdict
from loadgen.history.rows import RoundRow

#: What a node's row shows of the round it rests on: (its key in JSON, heading, value).
ROUND_FACTS: tuple[tuple[str, str, Callable[[RoundRow], Any]], ...] = (
    ("vllm_version", "vLLM", lambda r: r.vllm_version),
    ("image", "image", lambda r: r.image),
    ("gpu_name", "GPU", lambda r: r.gpu_name),
    ("c128a_layout", "layout", lambda r: r.c128a_layout))


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _round_name(n: NodeVerdict) -> str:
    if n.round is None:
        return "-"
    return f"{n.round.soak_id} #{n.round.round}"


def _facts(r: RoundRow | None) -> list[str]:
    return [str((get(r) if r is not None else None) or "-") for _, _, get in ROUND_FACTS]


def _ended(r: RoundRow | None) -> str:
    return _when(r.ended if r is not None else None)


def fleet_json(v: FleetVerdict) -> dict[str, Any]:
    def round_doc(r: RoundRow) -> dict[str, Any]:
        return {"soak_id": r.soak_id, "round": r.round, "started": r.started,
                "ended": r.ended, "exit_code": r.exit_code, "measured": r.measured,
                "gated_failures": r.gated_failures, "note": r.note,
                "results_dir": r.results_dir, **{key: get(r) for key, _, get in ROUND_FACTS}}

    def node(n: NodeVerdict) -> dict[str, Any]:
        return {"node": n.node, "state": str(n.state), "passed": n.passed,
                "expected": n.expected, "why": n.why,
                "round": None if n.round is None else round_doc(n.round)}

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
              + " | ".join(h for _, h, _ in ROUND_FACTS) + " |",
              "|---|---|---|---|---|" + "---|" * len(ROUND_FACTS)]
    for n in v.nodes:
        facts = " | ".join(_facts(n.round))
        name = n.node if n.expected else f"{n.node} (not named)"
        lines.append(f"| {name} | {STATE_WORDS[n.state]} | {n.why} | {_round_name(n)} | "
                     f"{_ended(n.round)} | {facts} |")
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
    for heading in ("node", "state", "why", "round", "ended", *(h for _, h, _ in ROUND_FACTS)):
        table.add_column(heading, overflow="fold")
    style = {NodeState.PASSED: "green", NodeState.RUNNING: "yellow"}
    for n in v.nodes:
        table.add_row(n.node if n.expected else f"{n.node} (not named)",
                      f"[{style.get(n.state, 'red')}]{STATE_WORDS[n.state]}[/]", n.why,
                      _round_name(n), _ended(n.round), *_facts(n.round))
    return table
