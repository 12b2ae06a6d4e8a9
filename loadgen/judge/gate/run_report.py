"""A run judged: its scenario, facts, statistics, gate and server facts, in one object.

Everything a report says about a run comes from here, rebuilt from the results
directory alone, so `dsv4-qual report DIR` after a crash, a later report version
or a second reader all see the same verdict.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loadgen.exit_codes import BadInputError
from loadgen.judge.gate.aggregate import (
    PhaseStats,
    RunStats,
    TimelinePoint,
    aggregate,
    failure_rate_by_in_flight,
    failure_rate_by_order,
    percentiles,
)
from loadgen.judge.gate.gate import GateContext, GateResult, evaluate, replies
from loadgen.judge.gate.session_view import SessionView, session_views
from loadgen.judge.run_level import Rule
from loadgen.judge.run_level.cross_talk import CrossTalk
from loadgen.judge.run_level.divergent import Divergent
from loadgen.judge.run_level.reference import ReferenceAgreement
from loadgen.judge.run_level.restated import Restated
from loadgen.results import RECORDS_FILE, is_run_dir, load_run, load_server
from loadgen.run_facts import RunFacts
from loadgen.scenario import Scenario
from loadgen.targets.facts import ServerFacts
from loadgen.taxonomy import RUN_LEVEL
from loadgen.workload import shares_prefixes


def rules_for(scenario: Scenario) -> list[Rule]:
    """Every run-level rule the scenario calls for, fresh for one pass over its records."""
    rules: list[Rule] = [Divergent(), CrossTalk(), Restated(scenario.verdicts)]
    if scenario.reference.requests > 0:
        rules.append(ReferenceAgreement(scenario.reference))
    return rules

@dataclass(frozen=True)
class PhaseTokens:
    completion: int
    reasoning: int
    prompt: int
    completion_per_request: dict[str, float | None]  # percentiles()


@dataclass(frozen=True)
class PhaseSummary:
    """One phase's figures as summary.json states them (`to_dict`) and every report
    shows them."""

    requests: int
    measured: int
    verdicts: dict[str, int]
    run_level_verdicts: list[str]  # counted from the records, judged over the whole run
    primary_verdicts: dict[str, int]
    rates: dict[str, float | None]  # of the measured replies
    finish_reasons: dict[str, int]
    infra_errors: int
    interrupted: int
    failed: int
    latency_s: dict[str, dict[str, float | None]]  # ttft, inter_token, e2e: percentiles()
    tokens: PhaseTokens
    wall_s: float | None
    tokens_per_s: float | None
    requests_per_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def phase_summary(st: PhaseStats) -> PhaseSummary:
    wall = st.wall_s
    tokens = sum(st.completion_tokens)
    measured = st.measured
    return PhaseSummary(
        requests=st.requests,
        measured=measured,
        verdicts=dict(sorted(st.verdicts.items())),
        run_level_verdicts=sorted(v.value for v in RUN_LEVEL if st.verdicts.get(v.value)),
        primary_verdicts=dict(sorted(st.primary.items())),
        rates={k: (v / measured if measured else None) for k, v in sorted(st.verdicts.items())},
        finish_reasons=dict(sorted(st.finish_reasons.items())),
        infra_errors=st.infra_errors,
        interrupted=st.interrupted,
        failed=len(st.failing_seqs),
        latency_s={
            "ttft": percentiles(st.ttft),
            "inter_token": percentiles(st.gap_mean),
            "e2e": percentiles(st.e2e),
        },
        tokens=PhaseTokens(
            completion=tokens, reasoning=st.reasoning_tokens, prompt=st.prompt_tokens,
            completion_per_request=percentiles([float(x) for x in st.completion_tokens])),
        wall_s=wall,
        tokens_per_s=(tokens / wall) if wall else None,
        requests_per_s=(st.requests / wall) if wall else None,
    )


@dataclass
class RunReport:
    out_dir: Path
    scenario: Scenario
    run: RunFacts
    server: ServerFacts
    stats: RunStats
    gate: GateResult

    @property
    def measurement(self) -> PhaseStats | None:
        return self.stats.phases.get("measurement")

    @functools.cached_property
    def sessions(self) -> list[SessionView]:
        """The measured sessions turn by turn (none unless the workload has sessions)."""
        return session_views(self.out_dir, self.stats.changed, lines=self.stats.turn_lines)

    @functools.cached_property
    def phase_summaries(self) -> dict[str, PhaseSummary]:
        """Every phase's figures, worked out once for summary.json and every report."""
        return {name: phase_summary(st) for name, st in self.stats.phases.items()}

    @functools.cached_property
    def timeline(self) -> list[TimelinePoint]:
        """Every phase's requests in request order, sorted once for every page."""
        return self.stats.timeline()

    @functools.cached_property
    def failure_by_order(self) -> tuple[int, list[int], list[float]]:
        """(bucket size, first seq of each bucket, % failed in it) over `timeline`: the
        run's page and a qualification's page plot the same series."""
        return failure_rate_by_order(self.timeline)

    @functools.cached_property
    def failure_by_in_flight(self) -> tuple[list[int], list[float]]:
        """(requests in flight when sent, % of them that failed) over `timeline`."""
        return failure_rate_by_in_flight(self.timeline)


def judge_run(out_dir: Path) -> RunReport:
    """Read a results directory and judge it (no file is written)."""
    if not is_run_dir(out_dir):
        raise BadInputError(f"{out_dir}: no run.json or {RECORDS_FILE}: not a dsv4-qual "
                            "results directory")
    scenario, run = load_run(out_dir)
    server = ServerFacts.from_document(load_server(out_dir))
    stats = aggregate(out_dir, [str(v) for v in scenario.gate.gated()], rules_for(scenario))
    context = GateContext(priming=stats.phases.get("priming"),
                          priming_planned=scenario.load.priming,
                          reference=scenario.reference,
                          acceptance=server.acceptance,
                          acceptance_by_server=server.acceptance_by_server,
                          sent=sum(st.requests for st in stats.phases.values()),
                          answered=sum(replies(st) for st in stats.phases.values()),
                          reference_stats=stats.phases.get("reference"),
                          reference_summary=stats.reference,
                          prefix_cache=server.prefix_cache,
                          asks_reuse=shares_prefixes(scenario.workload))
    gate = evaluate(scenario.gate, stats.phases.get("measurement"), run, server, context)
    return RunReport(out_dir, scenario, run, server, stats, gate)
