"""Sentences about the run itself (its load, its run-level verdicts, its reference phase),
shared by every human-readable report."""

from __future__ import annotations

from collections import Counter

from loadgen.judge.gate.run_report import RunReport
from loadgen.judge.gate.session_view import MAX_DETAILS
from loadgen.judge.run_level.reference import ReferenceSummary
from loadgen.load_claim import LoadClaim, describe
from loadgen.results.run_level import RunLevelLine
from loadgen.run_facts import ClientReport
from loadgen.taxonomy import Verdict, by_severity

#: What each run-level verdict means, in the words of a console line.
RUN_LEVEL_MEANING = {
    Verdict.DIVERGENT.value: "identical greedy bodies, different answers",
    Verdict.CROSS_TALK.value: "another request's facts in the reply",
    Verdict.REFERENCE_MISMATCH.value: "unlike the same body's reply alone",
}


def load_claim(report: RunReport) -> LoadClaim | None:
    return report.run.load


def load_text(report: RunReport) -> str:
    """'concurrency 64, priming 256, ...' and, when the command line changed it, the
    shipped load beside it."""
    claim = load_claim(report)
    if claim is None:
        return describe(report.scenario.load_values())
    text = describe(claim.effective)
    if claim.changed:
        text += f" (shipped: {describe(claim.shipped)})"
    return text


def run_level_text(report: RunReport) -> str:
    """What the run-level rules changed, in one sentence (empty when nothing)."""
    added: dict[str, int] = {}
    replaced: dict[str, int] = {}
    for c in report.stats.changed:
        for v in c.run_level:
            added[v] = added.get(v, 0) + 1
        for v in c.replaced:
            replaced[v] = replaced.get(v, 0) + 1
    if not added:
        return ""
    text = ("Judged across the run (run_level.jsonl): "
            + ", ".join(f"{v} {n}" for v, n in sorted(added.items())))
    if replaced:
        text += " (in place of " + ", ".join(f"{v} {n}" for v, n in sorted(replaced.items())) \
            + ": the wrong facts were another request's)"
    return text + "."


def _counted_before(change: RunLevelLine) -> str:
    """The verdict the progress lines counted the record under: its own most severe one
    (run-level verdicts come after the run; the ones they replaced were its own)."""
    own = (set(change.verdicts) - set(change.run_level) | set(change.replaced)) - {"ok"}
    known = [Verdict(v) for v in own if v in Verdict._value2member_map_]
    return by_severity(known)[0].value if known else Verdict.OK.value


def run_level_lines(report: RunReport) -> list[str]:
    """For the console, one line per phase the run-level rules changed.

    The progress lines count each reply once, under its most severe verdict, as it
    completes; the run-level verdicts are judged after the run over all its replies, so
    without this line the final counts (a table, a report) disagree with the progress
    lines unannounced: 'ok=43' above, 'ok 39' below."""
    lines = []
    for phase in report.stats.phases:
        added: Counter[str] = Counter()
        moved: dict[str, Counter[str]] = {}
        for change in report.stats.changed:
            if change.phase != phase:
                continue
            added.update(change.run_level)
            before, after = _counted_before(change), change.verdicts[0]
            if after in change.run_level and after != before:
                moved.setdefault(after, Counter())[before] += 1
        if not added:
            continue
        parts = []
        for name, count in sorted(added.items()):
            text = f"{name} {count} ({RUN_LEVEL_MEANING.get(name, 'judged over the run')}"
            was = moved.get(name)
            if was and len(was) == 1:
                [(old, n)] = was.items()
                text += f"; {n} of them counted {old} above"
            elif was:
                text += (f"; {sum(was.values())} of them counted above as "
                         + ", ".join(f"{old} {n}" for old, n in sorted(was.items())))
            parts.append(text + ")")
        lines.append(f"{phase}: run-level verdicts, judged once the run ended: "
                     + "; ".join(parts))
    return lines


def reference_lines(summary: ReferenceSummary | None) -> list[str]:
    """The reference phase in a few sentences (empty when it did not run)."""
    if summary is None:
        return []
    sim = summary.similarity
    lines = [
        f"{summary.solo_replies} body(ies) answered alone "
        f"({summary.oracles} of them usable as an oracle); "
        f"{summary.compared} loaded replies held to them: "
        f"{summary.verifiable_mismatches} disagree in their verifiable fields "
        f"(tool call or prose, functions, ids and enums, the codes stated).",
    ]
    if summary.texts_compared:
        lines.append(
            f"Free text of {summary.texts_compared} of them: {summary.identical} "
            f"identical; similarity min {sim.get('min')}, p10 {sim.get('p10')}, "
            f"median {sim.get('p50')}; reasoning similarity median "
            f"{summary.reasoning_similarity.get('p50')} ("
            + ("gated: the server is declared batch-invariant)" if summary.batch_invariant
               else "reported, not gated: the server is not declared batch-invariant)"))
    if summary.unusable:
        lines.append(f"{len(summary.unusable)} solo reply(ies) were no oracle (broken alone: "
                     + "; ".join(sorted(set(summary.unusable.values())))[:200]
                     + "): loaded replies of those bodies were not held to them.")
    return lines


def answers_lines(report: RunReport) -> list[str]:
    """The measured replies whose answer was checked exactly, and the failure rate of
    each group they fall in (probe, turn regime, shared prefix, reasoning, prompt
    length, prefix-cache hit), as Markdown."""
    answers = report.gate.answers
    if answers is None:
        return []
    lines = [f"{answers.checked} of {report.gate.measured} measured replies had an answer "
             f"checked exactly; {answers.failed} of them failed, {answers.wrong} with a wrong "
             "answer." + (f" Failure rate among them below "
                          f"{100 * answers.upper_bound_95:.3g}% at 95%."
                          if answers.upper_bound_95 is not None else "")]
    reuse = report.gate.prefix_cache
    if reuse is not None and reuse.rate is not None:
        lines.append(f"Prefix cache (the server's counters): {reuse.hits:,.0f} of "
                     f"{reuse.queries:,.0f} prompt tokens served from it "
                     f"({100 * reuse.rate:.1f}%).")
    for kind, cells in answers.breakdown.items():
        lines += ["", f"| {kind} | requests | failed | rate |", "|---|---:|---:|---:|"]
        lines += [f"| {value} | {c.requests} | {c.failed} | {100 * c.rate:.1f}% |"
                  for value, c in cells.items()]
    return lines


def session_lines(report: RunReport) -> list[str]:
    """Each measured session turn by turn (`.` ok, `x` failed), then the failed turns:
    what was asked, what was expected, what came back."""
    views = report.sessions
    if not views:
        return []
    lines = ["| session | shared prefix | turns | failed |", "|---|---:|---|---:|"]
    for view in views:
        marks = "".join("." if t.ok else "x" for t in view.turns)
        lines.append(f"| {view.session} | {view.prefix_tokens} | `{marks}` | "
                     f"{len(view.failed)} |")
    details = [(v, t) for v in views for t in v.failed][:MAX_DETAILS]
    if details:
        lines += ["", "| session, turn | regime | verdicts | asked | expected | got |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {v.session} #{t.index} | {t.regime} | {', '.join(t.verdicts)} | "
                  f"{_cell(t.asked)} | {_cell(t.expected)} | {_cell(t.got)} |"
                  for v, t in details]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def client_saturation(client: ClientReport) -> str:
    """Why the run's timings are the client's, and what to change: its own work (fewer
    in flight, worker processes) or a busy host (a quieter machine). Empty when they
    are the server's."""
    if not client.saturated:
        return ""
    lag = f"event-loop lag p99 {client.loop_lag_ms_p99} ms"
    if client.saturation == "host":
        waited = (f", and waited {_pct(client.cpu_wait_share)} of the run for a CPU other "
                  "processes held" if client.cpu_wait_share is not None else "")
        return (f"**Host busy**: the load generator's {lag} while it used "
                f"{_pct(client.cpu_util)} of a CPU itself{waited}; timings include that "
                "wait: run it on a quieter machine.")
    return (f"**Client saturated**: the load generator's own work was the bottleneck "
            f"(its CPU {_pct(client.cpu_util)} of a core, {lag}); timings are the "
            "client's: fewer requests in flight, or --workers.")
