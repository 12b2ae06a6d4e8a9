"""One streaming pass over records.jsonl -> per-phase statistics.

The records stay on disk; this keeps only numbers (latencies, counts) and the first
few failures' text, so a 20,000-request soak reports in constant-ish memory.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.judge.taxonomy import INFRA_VERDICTS, Verdict
from loadgen.judge.verdicts import divergent_seqs, greedy_entry
from loadgen.records import RECORDS_FILE, RequestRecord, iter_record_dicts

FORENSIC_FAILURES = 10
TAIL_CHARS = 600


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
    # (seq, primary verdict, in_flight, sent offset s, failed) in completion order.
    timeline: list[tuple[int, str, int, float, bool]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def measured(self) -> int:
        """Requests that count towards a rate: interrupted ones never finished."""
        return self.requests - self.interrupted

    @property
    def wall_s(self) -> float | None:
        if self.first_sent is None or self.last_end is None:
            return None
        return max(0.0, self.last_end - self.first_sent)


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


def ordered_timeline(stats: RunStats) -> list[tuple[int, str, int, float, bool]]:
    """Every phase's (seq, primary verdict, in flight, sent s, failed), in request order."""
    return sorted((t for st in stats.phases.values() for t in st.timeline), key=lambda t: t[0])


def failure_rate_by_order(timeline: list[tuple[int, str, int, float, bool]]
                          ) -> tuple[int, list[int], list[float]]:
    """(bucket size, first seq of each bucket, % failed in it): #52448's 'clean first 256,
    then rising' shows as the rate per bucket of consecutive requests."""
    bucket = max(8, len(timeline) // 16)
    xs, ys = [], []
    for i in range(0, len(timeline), bucket):
        chunk = timeline[i:i + bucket]
        xs.append(chunk[0][0])
        ys.append(100 * sum(1 for t in chunk if t[4]) / len(chunk))
    return bucket, xs, ys


@dataclass
class RunStats:
    phases: dict[str, PhaseStats]
    divergent: set[int]
    records: int
    run_start: float | None


def aggregate(out_dir: Path, fail_on: list[str]) -> RunStats:
    """Statistics of every phase; `fail_on` decides what counts as a gated failure."""
    fail = set(fail_on)
    phases: dict[str, PhaseStats] = {}
    greedy: list[tuple[str, int, bytes]] = []
    phase_of: dict[int, str] = {}
    total = 0
    run_start: float | None = None
    path = out_dir / RECORDS_FILE
    if not path.exists():
        return RunStats({}, set(), 0, None)
    for d in iter_record_dicts(path):
        total += 1
        phase = str(d.get("phase") or "measurement")
        st = phases.setdefault(phase, PhaseStats())
        verdicts = [str(v) for v in (d.get("verdicts") or ["ok"])]
        st.requests += 1
        st.verdicts.update(set(verdicts))
        st.primary[verdicts[0]] += 1
        if d.get("finish_reason"):
            st.finish_reasons[str(d["finish_reason"])] += 1
        t = d.get("timings") or {}
        sent = t.get("sent")
        if isinstance(sent, int | float):
            run_start = sent if run_start is None else min(run_start, sent)
            st.first_sent = sent if st.first_sent is None else min(st.first_sent, sent)
            if isinstance(t.get("end"), int | float):
                end = sent + t["end"]
                st.last_end = end if st.last_end is None else max(st.last_end, end)
        firsts = [t.get(k) for k in ("first_reasoning", "first_content")
                  if isinstance(t.get(k), int | float)]
        if firsts:
            st.ttft.append(min(firsts))
        if isinstance(t.get("gap_mean"), int | float):
            st.gap_mean.append(t["gap_mean"])
        is_infra = any(Verdict(v) in INFRA_VERDICTS for v in verdicts
                       if v in Verdict._value2member_map_)
        if Verdict.INTERRUPTED.value in verdicts:
            st.interrupted += 1
        elif is_infra:
            st.infra_errors += 1
        elif isinstance(t.get("end"), int | float):
            st.e2e.append(t["end"])
        usage = d.get("usage") or {}
        if isinstance(usage.get("completion_tokens"), int):
            st.completion_tokens.append(usage["completion_tokens"])
        st.reasoning_tokens += usage.get("reasoning_tokens") or 0
        st.prompt_tokens += usage.get("prompt_tokens") or 0
        failed = bool(fail.intersection(verdicts))
        seq = int(d.get("seq", -1))
        if failed:
            st.failing_seqs.add(seq)
        st.timeline.append((seq, verdicts[0], int(d.get("in_flight") or 0),
                            float(sent or 0.0), failed))
        interesting = failed or verdicts[0] not in ("ok", "interrupted")
        if interesting and len(st.failures) < FORENSIC_FAILURES:
            st.failures.append({
                "seq": seq, "verdicts": verdicts, "finish_reason": d.get("finish_reason"),
                "completion_tokens": usage.get("completion_tokens"),
                "error": d.get("error"), "reasoning_tail": _tail(d.get("reasoning") or ""),
                "content_tail": _tail(d.get("content") or ""),
                "tool_calls": d.get("tool_calls") or [],
            })
        if d.get("greedy") and d.get("body_hash"):
            entry = greedy_entry(RequestRecord.from_dict(d))
            if entry is not None:
                greedy.append(entry)
                phase_of[seq] = phase
    divergent = divergent_seqs(greedy)
    for seq in divergent:
        st = phases[phase_of[seq]]
        st.verdicts[Verdict.DIVERGENT.value] += 1
        if Verdict.DIVERGENT.value in fail:
            st.failing_seqs.add(seq)
    if run_start is not None:
        for st in phases.values():
            st.timeline = [(s, v, f, sent - run_start, bad) for s, v, f, sent, bad in st.timeline]
    return RunStats(phases, divergent, total, run_start)
