"""Telemetry over time for report.html: load, KV cache, throughput, spec decode, preemptions.

Each plot answers one question about the server while the requests ran: was it
saturated (waiting requests, KV cache full, preemptions), how fast did it go, and did
speculative decoding keep accepting drafts (DSpark was one of #52448's conditions).
"""

from __future__ import annotations

from typing import Any

from loadgen.report.figures import png_data_uri, subplots
from loadgen.targets.telemetry_summary import MIN_SAMPLES, gauge_series, intervals


def _label(url: str, many: bool, name: str) -> str:
    return f"{name} ({url})" if many else name


def telemetry_plots(every: dict[str, list[dict[str, Any]]]
                    ) -> list[tuple[str, str | None, str]]:
    """(title, PNG data URI or None, the sentence instead) for every telemetry question the
    /metrics samples can answer (`every`: each server's, in time order, as
    `ServerFacts.samples_by_server` holds them); a run too short to sample says so."""
    series = {url: points for url, points in every.items() if len(points) >= MIN_SAMPLES}
    if not series:
        return [("Server telemetry over time", None,
                 "The run was too short to sample /metrics under load.")] if every else []
    many = len(series) > 1
    plots: list[tuple[str, str | None, str]] = []

    def finish(fig: Any, ax: Any, title: str, ylabel: str, drawn: bool) -> None:
        """Keep a figure that shows something, its axis from 0; drop an empty one."""
        if drawn:
            ax.set_xlabel("seconds since run start")
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1.0))
            ax.legend(fontsize=8)
            plots.append((title, png_data_uri(fig), ""))

    def gauge_plot(title: str, keys: tuple[str, ...], ylabel: str, scale: float = 1.0) -> None:
        fig, ax = subplots(figsize=(9, 2.8))
        drawn = False
        for url, points in series.items():
            for key in keys:
                pts = [(t, value * scale) for t, value in gauge_series(points, key)]
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker=".", label=_label(url, many, key))
                    drawn = True
        finish(fig, ax, title, ylabel, drawn)

    gauge_plot("Server load over time: running and waiting requests",
               ("requests_running", "requests_waiting"), "requests")
    gauge_plot("KV-cache usage over time", ("kv_cache_usage",), "% used", 100.0)

    rates = {url: intervals(points) for url, points in series.items()}

    def rate_plot(title: str, attrs: tuple[tuple[str, str], ...], ylabel: str,
                  scale: float = 1.0) -> None:
        fig, ax = subplots(figsize=(9, 2.8))
        drawn = False
        for url, ivs in rates.items():
            for attr, name in attrs:
                # Each rate holds over its interval: draw it from the interval's start
                # to its end (a step held until the last scrape).
                pts = [(iv.t - iv.seconds, getattr(iv, attr) * scale) for iv in ivs
                       if getattr(iv, attr) is not None]
                if pts:
                    pts.append((ivs[-1].t, pts[-1][1]))
                    ax.step(*zip(*pts, strict=True), where="post",
                            label=_label(url, many, name))
                    drawn = True
        finish(fig, ax, title, ylabel, drawn)

    rate_plot("Throughput over time (from /metrics token counters)",
              (("prompt_tps", "prompt tokens/s"), ("generation_tps", "generation tokens/s")),
              "tokens/s")
    rate_plot("Speculative decoding acceptance over time (accepted / drafted tokens)",
              (("spec_acceptance", "acceptance"),), "% accepted", 100.0)
    rate_plot("Preemptions per scrape interval", (("preemptions", "preemptions"),),
              "preemptions")
    return plots
