"""One streaming pass over records.jsonl -> per-phase statistics, run-level verdicts included.

The records stay on disk; this keeps only numbers (latencies, counts), each record's
verdicts, and the first few failures' text, so a 20,000-request soak reports in
constant-ish memory (but for the cross-talk rule, which holds the texts of the completed
replies, compressed, until every owner of a code is known: `run_level.cross_talk`).

records.jsonl is read once: each line into a `RequestRecord`, and the run-level rules
(`judge.run_level`) observe that same record in the same pass; what they revise is then
counted in place of the per-reply verdicts. Where each line lies is kept (seq -> byte
offset and length), so the few revised records whose text the forensics need are parsed
again from their own lines, not from a second read.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from loadgen.judge.findings import Findings
from loadgen.judge.gate.answer_stats import ANSWER_VERDICTS, AnswerStats, CheckedAnswers
from loadgen.judge.run_level import (
    Revision,
    Rule,
    RuleSummary,
    combine,
    own_verdicts,
)
from loadgen.judge.run_level.reference import ReferenceSummary
from loadgen.records import RequestRecord, iter_record_lines, record_at
from loadgen.results import RECORDS_FILE
from loadgen.results.run_level import RunLevelLine
from loadgen.taxonomy import RUN_LEVEL, Verdict, counts_as_infra_error

FORENSIC_FAILURES = 10
#: Extra forensic tails for records a run-level rule revised, one per run-level verdict,
#: so a report always shows an example of each even when the first failures were others.
RUN_LEVEL_TAILS = len(RUN_LEVEL)
TAIL_CHARS = 600


class TimelinePoint(NamedTuple):
    """One request as the order plots see it."""

    seq: int
    verdict: str  # the most severe
    in_flight: int  # requests in flight when it was sent, itself included
    sent_s: float  # seconds after the run's first request was sent
    failed: bool  # carries a gated verdict


@dataclass
class FailureTail:
    """The end of a failed reply: what people paste into a bug report."""

    seq: int
    verdicts: list[str]
    finish_reason: str | None
    completion_tokens: int | None
    error: str | None
    reasoning_tail: str
    content_tail: str
    tool_calls: list[dict[str, Any]]
    findings: dict[str, Any]  # why each verdict was given (the loop, the leak, the call)

    @property
    def why(self) -> Findings:
        """The findings typed, as every report reads them."""
        return Findings.read(self.findings)


@dataclass
class PhaseStats:
    requests: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    primary: Counter[str] = field(default_factory=Counter)
    finish_reasons: Counter[str] = field(default_factory=Counter)
    ttft: list[float] = field(default_factory=list)
    gap_mean: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    completion_tokens: list[int] = field(default_factory=list)
    reasoning_tokens: int = 0
    prompt_tokens: int = 0
    first_sent: float | None = None
    last_end: float | None = None
    infra_errors: int = 0
    interrupted: int = 0
    failing_seqs: set[int] = field(default_factory=set)
    timeline: list[TimelinePoint] = field(default_factory=list)  # in completion order
    failures: list[FailureTail] = field(default_factory=list)
    #: Replies with an answer checked exactly, and the groups of every reply.
    answers: AnswerStats = field(default_factory=AnswerStats)
    wrong_seqs: set[int] = field(default_factory=set)  # answer itself wrong (final)
    #: Requests sent again after a kept connection the server had closed (not failures).
    transport_retries: int = 0
    _at: dict[int, int] = field(default_factory=dict, repr=False)  # seq -> timeline index

    @property
    def measured(self) -> int:
        """Requests that count towards a rate: interrupted ones never finished."""
        return self.requests - self.interrupted

    def checked_answers(self) -> CheckedAnswers:
        """The phase's checked answers, counted with the final verdicts."""
        return self.answers.summary(self.failing_seqs, self.wrong_seqs)

    @property
    def wall_s(self) -> float | None:
        if self.first_sent is None or self.last_end is None:
            return None
        return max(0.0, self.last_end - self.first_sent)

    def add(self, rec: RequestRecord, verdicts: list[str], failed: bool) -> None:
        """Count one record (as read from disk) into this phase."""
        self.requests += 1
        self.verdicts.update(set(verdicts))
        self.primary[verdicts[0]] += 1
        if rec.finish_reason:
            self.finish_reasons[str(rec.finish_reason)] += 1
        t = rec.timings
        sent = _figure(t.sent) or None  # epoch 0: a record that never said when it was sent
        end = _figure(t.end)
        if sent is not None:
            self.first_sent = sent if self.first_sent is None else min(self.first_sent, sent)
            if end is not None:
                last = sent + end
                self.last_end = last if self.last_end is None else max(self.last_end, last)
        firsts = [v for v in (_figure(t.first_reasoning), _figure(t.first_content))
                  if v is not None]
        if firsts:
            self.ttft.append(min(firsts))
        if (gap := _figure(t.gap_mean)) is not None:
            self.gap_mean.append(gap)
        if Verdict.INTERRUPTED.value in verdicts:
            self.interrupted += 1
        elif counts_as_infra_error(verdicts):
            self.infra_errors += 1
        elif end is not None:
            self.e2e.append(end)
        usage = rec.usage
        if isinstance(usage.completion_tokens, int):
            self.completion_tokens.append(usage.completion_tokens)
        self.reasoning_tokens += usage.reasoning_tokens or 0
        self.prompt_tokens += usage.prompt_tokens or 0
        seq = int(rec.seq)
        if failed:
            self.failing_seqs.add(seq)
        if ANSWER_VERDICTS.intersection(verdicts):
            self.wrong_seqs.add(seq)
        if rec.transport_retry:
            self.transport_retries += 1
        self.answers.add(rec, replied=Verdict.INTERRUPTED.value not in verdicts
                         and not counts_as_infra_error(verdicts))
        self._at[seq] = len(self.timeline)
        self.timeline.append(TimelinePoint(seq, verdicts[0], int(rec.in_flight or 0),
                                           float(sent or 0.0), failed))
        interesting = failed or verdicts[0] not in ("ok", "interrupted")
        if interesting and len(self.failures) < FORENSIC_FAILURES:
            self.failures.append(failure_tail(rec, verdicts))

    def revise(self, seq: int, old: list[str], new: list[str], failed: bool,
               findings: dict[str, Any]) -> None:
        """Count a record's final verdicts (a run-level rule revised them) in place of
        the ones it was counted with."""
        self.verdicts.subtract(set(old))
        self.verdicts.update(set(new))
        self.verdicts = +self.verdicts  # drop what fell to zero
        self.primary[old[0]] -= 1
        self.primary[new[0]] += 1
        self.primary = +self.primary
        if failed:
            self.failing_seqs.add(seq)
        else:
            self.failing_seqs.discard(seq)
        if ANSWER_VERDICTS.intersection(new):
            self.wrong_seqs.add(seq)
        else:
            self.wrong_seqs.discard(seq)
        at = self._at.get(seq)
        if at is not None:
            self.timeline[at] = self.timeline[at]._replace(verdict=new[0], failed=failed)
        for tail in self.failures:
            if tail.seq == seq:
                tail.verdicts = new
                tail.findings = {**tail.findings, **findings}


def failure_tail(rec: RequestRecord, verdicts: list[str],
                 extra: dict[str, Any] | None = None) -> FailureTail:
    return FailureTail(
        seq=int(rec.seq), verdicts=verdicts, finish_reason=rec.finish_reason,
        completion_tokens=rec.usage.completion_tokens, error=rec.error,
        reasoning_tail=_tail(rec.reasoning or ""),
        content_tail=_tail(rec.content or ""),
        tool_calls=rec.tool_calls or [],
        findings={**(rec.findings or {}), **(extra or {})})


def _figure(value: object) -> float | None:
    """A number as a record states it; None for anything else a file may hold there."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None, "mean": None}
    s = sorted(values)

    def q(p: float) -> float:
        return s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))]

    return {"p50": q(0.50), "p90": q(0.90), "p99": q(0.99), "max": s[-1],
            "mean": sum(s) / len(s)}


def _tail(text: str) -> str:
    return text[-TAIL_CHARS:] if len(text) > TAIL_CHARS else text


@dataclass
class RunStats:
    phases: dict[str, PhaseStats]
    records: int
    run_start: float | None
    #: What the run-level rules changed: one entry per revised record (run_level.jsonl).
    changed: list[RunLevelLine] = field(default_factory=list)
    #: What each run-level rule says beyond its revisions (the reference agreement).
    rule_summaries: dict[str, RuleSummary] = field(default_factory=dict)
    #: Where the lines of session turns (records whose params have a `turn`) lie in
    #: records.jsonl, in file order: the session views read these alone. None: not known.
    turn_lines: list[tuple[int, int]] | None = None

    @property
    def reference(self) -> ReferenceSummary | None:
        """The reference phase's agreement, where the run had one."""
        found = self.rule_summaries.get("reference")
        return found if isinstance(found, ReferenceSummary) else None

    def timeline(self) -> list[TimelinePoint]:
        """Every phase's points, in request order."""
        return sorted((p for st in self.phases.values() for p in st.timeline),
                      key=lambda p: p.seq)

    def seqs_with(self, verdict: Verdict) -> list[int]:
        """Seqs whose final verdicts carry a run-level `verdict`, in order."""
        return sorted(c.seq for c in self.changed if verdict.value in c.verdicts)


def failure_rate_by_order(timeline: list[TimelinePoint]) -> tuple[int, list[int], list[float]]:
    """(bucket size, first seq of each bucket, % failed in it): #52448's 'clean first 256,
    then rising' shows as the rate per bucket of consecutive requests."""
    bucket = max(8, len(timeline) // 16)
    xs, ys = [], []
    for i in range(0, len(timeline), bucket):
        chunk = timeline[i:i + bucket]
        xs.append(chunk[0].seq)
        ys.append(100 * sum(1 for p in chunk if p.failed) / len(chunk))
    return bucket, xs, ys


def failure_rate_by_in_flight(timeline: list[TimelinePoint]) -> tuple[list[int], list[float]]:
    """(requests in flight when sent, % of them that failed): a bug of concurrent decode
    fails more the more requests share a step."""
    by_flight: dict[int, list[bool]] = defaultdict(list)
    for point in timeline:
        by_flight[point.in_flight].append(point.failed)
    keys = sorted(by_flight)
    return keys, [100 * sum(by_flight[k]) / len(by_flight[k]) for k in keys]


def aggregate(out_dir: Path, fail_on: list[str], rules: list[Rule] | None = None) -> RunStats:
    """Statistics of every phase; `fail_on` decides what counts as a gated failure.

    Each record is counted with its own verdicts as it is read and shown to every
    run-level rule; the records the rules revise are then counted with their final
    verdicts instead (`RunStats.changed` says which and why)."""
    fail = set(fail_on)
    phases: dict[str, PhaseStats] = {}
    seen: dict[int, tuple[str, str, list[str]]] = {}  # seq -> (phase, item id, own verdicts)
    total = 0
    path = out_dir / RECORDS_FILE
    if not path.exists():
        return RunStats({}, 0, None)
    rules = rules or []
    lines: dict[int, list[tuple[int, int]]] = {}  # seq -> where its lines lie in the file
    turn_lines: list[tuple[int, int]] = []  # where the session turns' lines lie
    with open(path, "rb") as fh:
        for at, size, d in iter_record_lines(fh):
            total += 1
            params = d.get("params")
            if isinstance(params, dict) and "turn" in params:
                turn_lines.append((at, size))
            rec = RequestRecord.read(d)
            seq = int(rec.seq)
            phase = str(rec.phase or "measurement")
            own = own_verdicts(rec)
            phases.setdefault(phase, PhaseStats()).add(rec, own, bool(fail.intersection(own)))
            seen[seq] = (phase, str(rec.item_id or ""), own)
            lines.setdefault(seq, []).append((at, size))
            for rule in rules:
                rule.observe(rec, own)
        changed = _apply(combine(rules), seen, phases, fail)
        if changed:
            _tails_of_revised(fh, lines, changed, phases)
    run_start = min((st.first_sent for st in phases.values() if st.first_sent is not None),
                    default=None)
    if run_start is not None:
        for st in phases.values():
            st.timeline = [p._replace(sent_s=p.sent_s - run_start) for p in st.timeline]
    summaries = {rule.name: summary for rule in rules
                 if (summary := rule.summary()) is not None}
    return RunStats(phases, total, run_start, changed, summaries, turn_lines)


def _apply(revisions: dict[int, Revision], seen: dict[int, tuple[str, str, list[str]]],
           phases: dict[str, PhaseStats], fail: set[str]) -> list[RunLevelLine]:
    changed = []
    for seq, revision in sorted(revisions.items()):
        if seq not in seen:
            continue
        phase, item_id, own = seen[seq]
        final = revision.apply(own)
        if final == own and not revision.findings:
            continue
        phases[phase].revise(seq, own, final, bool(fail.intersection(final)),
                             revision.findings)
        changed.append(RunLevelLine(seq=seq, phase=phase, item_id=item_id, verdicts=final,
                               run_level=sorted(v.value for v in revision.add),
                               replaced=sorted(v.value for v in revision.remove
                                               if v.value in own),
                               findings=revision.findings))
    return changed


def _tails_of_revised(fh: IO[bytes], lines: dict[int, list[tuple[int, int]]],
                      changed: list[RunLevelLine], phases: dict[str, PhaseStats]) -> None:
    """Forensic tails for revised records: one example of each run-level verdict that
    none of a phase's tails shows yet (the record's own lines are parsed again, only
    for these: `lines` says where they lie in the open records file)."""
    wanted: dict[int, RunLevelLine] = {}
    for phase, st in phases.items():
        shown = {v for tail in st.failures for v in tail.verdicts}
        have = {tail.seq for tail in st.failures}
        room = FORENSIC_FAILURES + RUN_LEVEL_TAILS - len(st.failures)
        for c in changed:
            if room <= 0:
                break
            if c.phase == phase and c.seq not in have and set(c.run_level) - shown:
                wanted[c.seq] = c
                shown.update(c.run_level)
                room -= 1
    if not wanted:
        return
    for seq, found in wanted.items():
        for at, size in lines.get(seq, ()):
            phases[found.phase].failures.append(
                failure_tail(RequestRecord.read(record_at(fh, at, size)), found.verdicts,
                             found.findings))
    for st in phases.values():
        st.failures.sort(key=lambda tail: tail.seq)
