"""One answer for a fleet: did this release pass on every node in the window?

Each node soaks (or gates) on its own and writes its rounds to the fleet's history
(`host` names the node). The answer is read from there, per node, from the node's last
finished round in the window:

- a node passes only when that round ran to its end, valid, and its gate held;
- a failed gate, an invalid round (the server went away, receipts missing, ...), a
  partial round (the soak was interrupted or its process died) or no round at all in
  the window are that node's failure: a node that did not report is never a pass;
- a node whose only round in the window is still running has not answered yet.

Which nodes must answer comes from the operator (`--nodes`, e.g. the Slurm job's node
list) or, when not named, from the history itself: every node that reported this
scenario over the look-back before the window. Nodes that reported without being named
are judged too (they ran the release) and listed as such.

Exit codes are a run's: 0 every node passed, 1 a node failed or did not report, 2 no
failure yet but the answer is not in (a node still running, or no node known at all).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from loadgen.exit_codes import ExitCode
from loadgen.history.pooling import COMPLETE, INVALID, PARTIAL, RUNNING, UNKNOWN, round_outcome
from loadgen.history.rows import RoundRow


class NodeState(StrEnum):
    PASSED = "passed"
    GATE_FAILED = "gate_failed"
    INVALID = "invalid"
    PARTIAL = "partial"
    RUNNING = "running"
    NO_REPORT = "no_report"


#: How reports name each state.
STATE_WORDS: dict[NodeState, str] = {
    NodeState.PASSED: "PASSED",
    NodeState.GATE_FAILED: "GATE FAILED",
    NodeState.INVALID: "INVALID",
    NodeState.PARTIAL: "PARTIAL",
    NodeState.RUNNING: "STILL RUNNING",
    NodeState.NO_REPORT: "NO REPORT",
}


@dataclass(frozen=True)
class NodeVerdict:
    """A node's answer: its state and the round it rests on (None: no round)."""

    node: str
    state: NodeState
    expected: bool
    why: str
    round: RoundRow | None = None

    @property
    def passed(self) -> bool:
        return self.state == NodeState.PASSED

    @property
    def failed(self) -> bool:
        return self.state not in (NodeState.PASSED, NodeState.RUNNING)


@dataclass(frozen=True)
class FleetVerdict:
    scenario: str | None
    since: float
    until: float
    expected_from: str
    nodes: list[NodeVerdict] = field(default_factory=list)
    filters: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> ExitCode:
        if any(n.failed for n in self.nodes):
            return ExitCode.GATE_FAILED
        if not self.nodes or any(n.state == NodeState.RUNNING for n in self.nodes):
            return ExitCode.RUN_INVALID
        return ExitCode.PASSED

    @property
    def failed_nodes(self) -> list[NodeVerdict]:
        return [n for n in self.nodes if n.failed]

    def statement(self) -> str:
        """The one line a pipeline prints: the answer and the nodes it rests on."""
        total = len(self.nodes)
        if not total:
            return ("FLEET INVALID: no node is known to have to answer (none named with "
                    "--nodes, none reported in the look-back); nothing to vouch for")
        failed = self.failed_nodes
        if failed:
            names = ", ".join(f"{n.node} ({STATE_WORDS[n.state].lower()})" for n in failed)
            return f"FLEET FAILED: {len(failed)} of {total} node(s) did not pass: {names}"
        running = [n.node for n in self.nodes if n.state == NodeState.RUNNING]
        if running:
            return (f"FLEET NOT YET DECIDED: {len(running)} of {total} node(s) have no "
                    f"finished round yet: {', '.join(running)}")
        return f"FLEET PASSED: all {total} node(s) passed their last round"


def _node(row: RoundRow) -> str:
    return str(row.host) if row.host else UNKNOWN


def _why(row: RoundRow, state: NodeState) -> str:
    if row.verdict_line:  # a qualification says it in one line
        return row.verdict_line
    measured, failures = row.measured, row.gated_failures
    note = (row.note or "").strip()
    if state == NodeState.PASSED:
        return f"{failures or 0} of {measured} failed (allowed {row.allowed})"
    if state == NodeState.GATE_FAILED:
        return f"{failures} of {measured} failed (allowed {row.allowed})"
    if state == NodeState.RUNNING:
        return "its round is still running"
    kind = "invalid" if state == NodeState.INVALID else "partial"
    return f"round {kind}" + (f": {note}" if note else f" (exit {row.exit_code})")


def _state(row: RoundRow) -> NodeState:
    outcome = round_outcome(row)
    if outcome == RUNNING:
        return NodeState.RUNNING
    if outcome == PARTIAL:
        return NodeState.PARTIAL
    if outcome == INVALID:
        return NodeState.INVALID
    assert outcome == COMPLETE
    return NodeState.PASSED if row.exit_code == ExitCode.PASSED \
        else NodeState.GATE_FAILED


def _last_answer(rows: list[RoundRow]) -> RoundRow:
    """The node's last finished round, else its running one (rows oldest first)."""
    finished = [r for r in rows if round_outcome(r) != RUNNING]
    return (finished or rows)[-1]


def judge_fleet(rows: Iterable[RoundRow], *, since: float, until: float,
                expected: Sequence[str] | None, seen_before: Iterable[str] = (),
                scenario: str | None = None,
                filters: dict[str, str] | None = None) -> FleetVerdict:
    """The fleet's answer from the rounds that started in [since, until].

    `expected`: the nodes named by the operator (None: not named); `seen_before`: the
    nodes that reported over the look-back, expected when none are named."""
    in_window: dict[str, list[RoundRow]] = {}
    for row in sorted(rows, key=lambda r: r.started or 0.0):
        if since <= (row.started or 0.0) <= until:
            in_window.setdefault(_node(row), []).append(row)
    if expected is not None:
        must = list(dict.fromkeys(expected))
        expected_from = f"{len(must)} node(s) named with --nodes"
    else:
        must = sorted(set(seen_before) | set(in_window))
        expected_from = (f"{len(must)} node(s) that reported this scenario in the "
                         "look-back or the window (name them with --nodes to be sure)")
    nodes: list[NodeVerdict] = []
    for name in list(must) + sorted(set(in_window) - set(must)):
        named = name in must
        if name not in in_window:
            nodes.append(NodeVerdict(name, NodeState.NO_REPORT, named,
                                     "no round in the window"))
            continue
        row = _last_answer(in_window[name])
        state = _state(row)
        nodes.append(NodeVerdict(name, state, named, _why(row, state), row))
    return FleetVerdict(scenario=scenario, since=since, until=until,
                        expected_from=expected_from, nodes=nodes, filters=filters or {})
