"""Which start of the server are we talking to?

Two questions hang on it. A soak primes once per server start, so it must notice a
restart between rounds. And patch receipts live in a directory that often outlives
the server (a Docker volume): a receipt from yesterday's server proves nothing about
today's, so only receipts written since the current start may count.

The best evidence is the server's own process start time (`process_start_time_seconds`,
which vLLM's /metrics exports through prometheus_client on Linux). Without it a
restart shows only as a readiness loss, and receipts are judged against a bound we
are given (`telemetry.receipts_since`) or the run's start minus a margin; the report
says which basis it used.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from loadgen.targets.receipts import ReceiptFacts
from loadgen.targets.telemetry import parse_prometheus

START_METRIC = "process_start_time_seconds"
# Two scrapes of one process can disagree by rounding; a restart moves it by far more.
SAME_START_TOLERANCE_S = 1.0


def start_time_from_metrics(text: str | None) -> float | None:
    """The server process's start (epoch seconds) from a /metrics text, if exported."""
    if not text:
        return None
    value = parse_prometheus(text).get(START_METRIC)
    return value if value and value > 0 else None


def same_start(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= SAME_START_TOLERANCE_S


@dataclass
class Observation:
    """One look at a server between runs: is it ready, and since when is it up."""

    base_url: str
    ready: bool
    start_time: float | None


def observe(base_url: str, verify_tls: bool = True, timeout_s: float = 10.0) -> Observation:
    """GET /health and /metrics once; never raises (a dead server is an observation)."""
    ready = False
    start = None
    with contextlib.suppress(httpx.HTTPError, OSError), \
            httpx.Client(verify=verify_tls, timeout=timeout_s) as http:
        ready = http.get(f"{base_url}/health").status_code == 200
        resp = http.get(f"{base_url}/metrics")
        if resp.status_code == 200:
            start = start_time_from_metrics(resp.text)
    return Observation(base_url, ready, start)


@dataclass
class RestartCheck:
    restarted: bool
    reasons: list[str] = field(default_factory=list)


def detect_restart(previous: dict[str, float | None] | None,
                   now: list[Observation]) -> RestartCheck:
    """Did any server start anew since `previous` (url -> start time) was seen?

    `previous` None means we know nothing about the server (a new or resumed soak
    without a recorded start): treat it as a new start, so it gets primed.
    """
    if previous is None:
        return RestartCheck(True, ["no earlier observation of this server"])
    reasons = []
    for obs in now:
        before = previous.get(obs.base_url)
        if not obs.ready:
            reasons.append(f"{obs.base_url} was not ready (readiness lost: restarting?)")
        elif obs.start_time is not None and not same_start(before, obs.start_time):
            reasons.append(f"{obs.base_url} process start time changed "
                           f"({_iso(before)} -> {_iso(obs.start_time)})")
        elif obs.start_time is None and before is not None:
            reasons.append(f"{obs.base_url} no longer exports {START_METRIC}")
    return RestartCheck(bool(reasons), reasons)


# -- receipts of the current server start ---------------------------------------------


def receipt_time(receipt: dict[str, Any]) -> float | None:
    """When the receipt's process loaded the plugin (its `time`), else the file's mtime."""
    value = receipt.get("time")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    mtime = receipt.get("file_mtime")
    return float(mtime) if isinstance(mtime, int | float) else None


def receipt_cutoff(process_start: float | None, since: float | None, run_started: float | None,
                   margin_s: float) -> tuple[float | None, str]:
    """The earliest receipt time that belongs to this server start, and why."""
    if since is not None:
        return since, "telemetry.receipts_since"
    if process_start is not None:
        return process_start - margin_s, (
            f"the server's process start time ({START_METRIC}) minus {margin_s:g} s")
    if run_started is not None:
        return run_started - margin_s, (
            f"the run's start minus {margin_s:g} s (no {START_METRIC} in /metrics)")
    return None, "no cutoff known: every receipt counted"


def select_receipts(server_doc: dict[str, Any], *, margin_s: float, since: float | None,
                    run_started: float | None) -> dict[str, Any]:
    """server.json with `receipts_selection`, and the summary/layout of current receipts only.

    Every receipt stays in `receipts` (forensics), marked `counted` or not; the gate
    and the reports weigh the counted ones (`targets.facts`), and `receipts_summary`
    states them for a person reading server.json.
    """
    starts = [start_time_from_metrics(info.get(f"metrics_{label}"))
              for info in (server_doc.get("servers") or {}).values()
              for label in ("before", "after")]
    known = [s for s in starts if s is not None]
    # The earliest start seen during the run: the server this run talked to first.
    process_start = min(known) if known else None
    cutoff, basis = receipt_cutoff(process_start, since, run_started, margin_s)
    kept, ignored = [], []
    receipts = [dict(r) for r in server_doc.get("receipts") or []]
    for receipt in receipts:
        written = receipt_time(receipt)
        receipt["counted"] = cutoff is None or (written is not None and written >= cutoff)
        (kept if receipt["counted"] else ignored).append(receipt)
    doc = dict(server_doc)
    doc["receipts"] = receipts
    doc["receipts_selection"] = {
        "receipts_dir": server_doc.get("receipts_dir"),
        "basis": basis,
        "cutoff": cutoff,
        "process_start_time": process_start,
        "kept": len(kept),
        "ignored": len(ignored),
        "ignored_files": [str(r.get("file")) for r in ignored][:100],
    }
    facts = ReceiptFacts.from_dicts(kept)
    doc["receipts_summary"] = facts.summary()
    layout = None
    for info in (server_doc.get("servers") or {}).values():
        layout = layout or info.get("c128a_layout")
    # What the processes that run the model ran, else what every receipt asked for.
    ran = sorted({p.effective_layout for p in facts.model_processes if p.effective_layout})
    if layout is None and (ran or facts.layouts):
        layout = ",".join(ran or facts.layouts)
    doc["c128a_layout"] = layout
    doc["c128a_layout_source"] = ("/metrics (dsv4_qual_c128a_layout_info)"
                                  if any(i.get("c128a_layout") for i in
                                         (server_doc.get("servers") or {}).values())
                                  else "patch receipts" if layout else None)
    return doc


def _iso(t: float | None) -> str:
    if t is None:
        return "unknown"
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")
