"""/metrics samples -> what the server was doing: load, KV cache, throughput, spec decode.

vLLM exports counters (tokens, preemptions, drafted and accepted tokens); a rate is
a difference between two scrapes over the time between them. A server restart
resets its counters, so a negative difference marks a restart, never a rate.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

GAUGES = ("requests_running", "requests_waiting", "kv_cache_usage")
COUNTERS = ("prompt_tokens", "generation_tokens", "preemptions", "spec_accepted_tokens",
            "spec_draft_tokens", "prefix_cache_queries", "prefix_cache_hits")


@dataclass
class Interval:
    """Rates over one interval between consecutive scrapes of one server."""

    t: float  # end of the interval, seconds since the run's telemetry began
    seconds: float
    prompt_tps: float | None
    generation_tps: float | None
    preemptions: float | None
    spec_acceptance: float | None  # accepted / drafted tokens in the interval


#: Fewer /metrics samples than this cannot show the server under load (the reports
#: then say the run was too short to sample, rather than plot or tabulate it).
MIN_SAMPLES = 3


def by_server(samples: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in samples:
        series[str(s.get("server", ""))].append(s)
    for points in series.values():
        points.sort(key=lambda s: float(s.get("t", 0.0)))
    return dict(series)


def _delta(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
    if key not in a or key not in b:
        return None
    d = float(b[key]) - float(a[key])
    return d if d >= 0 else None  # a counter went down: the server restarted


def gauge_series(points: list[dict[str, Any]], gauge: str) -> list[tuple[float, float]]:
    """(seconds, value) of a gauge (GAUGES) over one server's samples, where sampled."""
    return [(float(p["t"]), float(p[gauge])) for p in points if gauge in p]


def intervals(points: list[dict[str, Any]]) -> list[Interval]:
    out = []
    for a, b in itertools.pairwise(points):
        seconds = float(b["t"]) - float(a["t"])
        if seconds <= 0:
            continue
        prompt = _delta(a, b, "prompt_tokens")
        gen = _delta(a, b, "generation_tokens")
        acc = _delta(a, b, "spec_accepted_tokens")
        drafted = _delta(a, b, "spec_draft_tokens")
        out.append(Interval(
            t=float(b["t"]), seconds=seconds,
            prompt_tps=None if prompt is None else prompt / seconds,
            generation_tps=None if gen is None else gen / seconds,
            preemptions=_delta(a, b, "preemptions"),
            spec_acceptance=(acc / drafted) if acc is not None and drafted else None,
        ))
    return out


def _span(points: list[dict[str, Any]], key: str) -> float | None:
    """Counter growth from first to last sample, summing across restarts' resets."""
    total = None
    for a, b in itertools.pairwise(points):
        if key in a and key in b:
            d = float(b[key]) - float(a[key])
            total = (total or 0.0) + (d if d >= 0 else float(b[key]))
    return total


@dataclass(frozen=True)
class TelemetryTotals:
    """Counters grown over the run, summed over the servers (None: no server said)."""

    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    preemptions: float | None = None
    spec_accepted_tokens: float | None = None
    spec_draft_tokens: float | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None

    @property
    def spec_acceptance_rate(self) -> float | None:
        if self.spec_accepted_tokens is None or not self.spec_draft_tokens:
            return None
        return self.spec_accepted_tokens / self.spec_draft_tokens

    def to_dict(self) -> dict[str, Any]:
        """Only what some server said (summary.json's `telemetry.total`)."""
        doc = {k: v for k, v in asdict(self).items() if v is not None}
        if self.spec_acceptance_rate is not None:
            doc["spec_acceptance_rate"] = self.spec_acceptance_rate
        return doc


@dataclass(frozen=True)
class ServerTelemetry(TelemetryTotals):
    """One server's /metrics over the run: how often it was sampled, its peaks and rates."""

    samples: int = 0
    seconds: float = 0.0
    max_requests_running: float | None = None
    max_requests_waiting: float | None = None
    max_kv_cache_usage: float | None = None
    process_starts_seen: int = 0

    def to_dict(self) -> dict[str, Any]:
        """summary.json's block of this server: every figure, None where not said."""
        return {**asdict(self), "spec_acceptance_rate": self.spec_acceptance_rate}


@dataclass(frozen=True)
class TelemetrySummary:
    servers: dict[str, ServerTelemetry] = field(default_factory=dict)
    total: TelemetryTotals = field(default_factory=TelemetryTotals)

    def to_dict(self) -> dict[str, Any]:
        """summary.json's `telemetry`."""
        return {"servers": {url: b.to_dict() for url, b in self.servers.items()},
                "total": self.total.to_dict()}


def summarize(server_doc: dict[str, Any]) -> TelemetrySummary:
    """One block per server plus the totals: what summary.json and the reports state."""
    servers = {}
    totals: dict[str, float] = defaultdict(float)
    for url, points in by_server(server_doc.get("samples") or []).items():
        seconds = (float(points[-1]["t"]) - float(points[0]["t"])) if len(points) > 1 else 0.0
        grown = {key: _span(points, key) for key in COUNTERS}
        peaks = {f"max_{key}": max((float(p[key]) for p in points if key in p), default=None)
                 for key in GAUGES}
        starts = {p["process_start_time"] for p in points if "process_start_time" in p}
        rates = {f"{key}_per_s": (None if not seconds or (n := grown[key]) is None
                                  else n / seconds)
                 for key in ("prompt_tokens", "generation_tokens")}
        block = ServerTelemetry(samples=len(points), seconds=seconds, **peaks, **grown, **rates,
                                process_starts_seen=len(starts))
        servers[url] = block
        for key, value in {**grown, **rates}.items():
            if value is not None:
                totals[key] += value
    return TelemetrySummary(servers, TelemetryTotals(**totals))


def _increase(points: list[dict[str, Any]], key: str) -> tuple[float, int] | None:
    """How much a counter grew over the points, and how often it went down (a restart
    resets it: the increase then counts from zero, as Prometheus's `increase()` does).
    None where a point lacks it."""
    values = [p.get(key) for p in points]
    if any(not isinstance(v, int | float) for v in values) or len(values) < 2:
        return None
    grown, resets = 0.0, 0
    for a, b in itertools.pairwise(float(v) for v in values):  # type: ignore[arg-type]
        if b >= a:
            grown += b - a
        else:
            grown += b
            resets += 1
    return grown, resets


def _phase_points(document: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per server and phase: the phase's start mark, the samples inside it, its end mark."""
    samples = by_server(list(document.get("samples") or []))
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for url, info in (document.get("servers") or {}).items():
        for phase, marks in (info.get("phase_marks") or {}).items():
            start, end = marks.get("start"), marks.get("end")
            if not isinstance(start, dict) or not isinstance(end, dict):
                continue
            lo, hi = float(start.get("t", 0.0)), float(end.get("t", 0.0))
            inside = [p for p in samples.get(url, []) if lo < float(p.get("t", 0.0)) < hi]
            out.setdefault(url, {})[phase] = [start, *inside, end]
    return out


@dataclass(frozen=True)
class PrefixReuse:
    """The server's prefix cache over one phase: prompt tokens looked up and found."""

    queries: float
    hits: float

    @property
    def rate(self) -> float | None:
        return self.hits / self.queries if self.queries > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"queries": self.queries, "hits": self.hits, "hit_rate": self.rate}


def prefix_reuse(document: dict[str, Any]) -> dict[str, PrefixReuse]:
    """Per phase, summed over the servers that export the counters (a phase no server
    counted is left out: the server says nothing of its cache)."""
    totals: dict[str, list[float]] = {}
    for phases in _phase_points(document).values():
        for phase, points in phases.items():
            queries = _increase(points, "prefix_cache_queries")
            hits = _increase(points, "prefix_cache_hits")
            if queries is None or hits is None:
                continue
            t = totals.setdefault(phase, [0.0, 0.0])
            t[0] += queries[0]
            t[1] += hits[0]
    return {phase: PrefixReuse(q, h) for phase, (q, h) in totals.items()}


def _acceptance(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    drafted = _increase(points, "spec_draft_tokens")
    accepted = _increase(points, "spec_accepted_tokens")
    if drafted is None or accepted is None:
        return None
    generated = _increase(points, "generation_tokens")  # the server's, not an engine's
    return {"drafted": drafted[0], "accepted": accepted[0],
            "acceptance": accepted[0] / drafted[0] if drafted[0] > 0 else None,
            "resets": max(drafted[1], accepted[1]),
            "generated": generated[0] if generated is not None else None}


def _replicas(points: list[dict[str, Any]]) -> list[str]:
    """The label sets (engines) every point counted separately, in order."""
    if not points or not all(isinstance(p.get("replicas"), dict) for p in points):
        return []
    names = [set(p["replicas"]) for p in points]
    return sorted(set.intersection(*names))


def acceptance_by_server(document: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Speculative decoding per server and phase: drafted and accepted tokens between
    the phase's start and end marks, through every /metrics sample in between (so a
    counter reset mid-phase is counted across and stated: `resets`), and their ratio
    where anything was drafted (`acceptance`, else None). A URL whose /metrics counts
    several engines (label sets) gives one entry per engine, `URL (engine=1)`: each is
    judged on its own, never in their sum."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for url, phases in _phase_points(document).items():
        for phase, points in phases.items():
            replicas = _replicas(points)
            counted = {f"{url} ({name})": _acceptance([p["replicas"][name] for p in points])
                       for name in replicas}
            if not replicas:
                counted = {url: _acceptance(points)}
            for who, figures in counted.items():
                if figures is not None:
                    out.setdefault(who, {})[phase] = figures
    return out


def phase_acceptance(by_server: dict[str, dict[str, dict[str, Any]]]
                     ) -> dict[str, dict[str, float]]:
    """Speculative decoding per phase, summed over the servers of `by_server` (what
    `acceptance_by_server` worked out, read here rather than worked out again; phases
    whose servers drafted nothing are left out)."""
    totals: dict[str, dict[str, float]] = {}
    for phases in by_server.values():
        for phase, counted in phases.items():
            t = totals.setdefault(phase, {"drafted": 0.0, "accepted": 0.0})
            t["drafted"] += counted["drafted"]
            t["accepted"] += counted["accepted"]
    return {phase: {**t, "acceptance": t["accepted"] / t["drafted"]}
            for phase, t in totals.items() if t["drafted"] > 0}
