"""Which start of which server are we talking to?

Two questions hang on it. A soak primes once per server start, so it must notice a
restart between rounds. And patch receipts live in a directory that often outlives
the server (a Docker volume) and may hold the receipts of several servers: a receipt
proves something about the server measured only if it belongs to the start of the
server that answered on the measured endpoint.

The evidence is an id: the dsv4-qual plugin's first process of a server start makes
one, every process of that start inherits it and writes it into its receipt, and the
API server exports it on /metrics (`dsv4_qual_server_info{server_id=...}`). The run
reads each endpoint's id at its start and its end (`telemetry`), and a receipt counts
only when its id is one of those; no clock, no margin. A receipt of another start
(yesterday's server, a restart, another replica's) or with no id at all (an older
plugin) is set aside, with the reason. An endpoint that exports no id cannot have any
receipt tied to it: the selection says so, and the gate (`judge.gate.receipt_rules`)
decides what that means for the run.

For restarts between soak rounds the id is used when the server exports it, else the
server's process start time (`process_start_time_seconds`, which vLLM's /metrics
exports through prometheus_client on Linux), else only a readiness loss shows one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from loadgen.targets.readiness import NOT_ROUTED
from loadgen.targets.receipts import (
    EndpointStart,
    ProcessReceipt,
    ReceiptFacts,
    ReceiptsSelection,
    SetAside,
    receipt_server_id,
)
from loadgen.targets.telemetry import SERVER_INFO_METRIC, parse_prometheus, server_ids

START_METRIC = "process_start_time_seconds"
# Two scrapes of one process can disagree by rounding; a restart moves it by far more.
SAME_START_TOLERANCE_S = 1.0
#: How many set-aside receipts server.json lists by name (a volume can hold thousands).
LISTED_SET_ASIDE = 100
SNAPSHOTS = ("before", "after")


def start_time_from_metrics(text: str | None) -> float | None:
    """The server process's start (epoch seconds) from a /metrics text, if exported."""
    if not text:
        return None
    value = parse_prometheus(text).get(START_METRIC)
    return value if value and value > 0 else None


def same_start(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= SAME_START_TOLERANCE_S


def single_id(text: str | None) -> str | None:
    """The one server id a /metrics text names; None for none or several."""
    ids = server_ids(text)
    return ids[0] if len(ids) == 1 else None


@dataclass
class Observation:
    """One look at a server between runs: is it ready, since when, and which start."""

    base_url: str
    ready: bool
    start_time: float | None
    server_id: str | None = None


def observe(base_url: str, verify_tls: bool = True, timeout_s: float = 10.0) -> Observation:
    """GET /health and /metrics once; never raises (a dead server is an observation).
    Where /health is not routed (404, 405: an ingress of /v1 only), GET /v1/models
    answering 200 is readiness, as the wait judges it."""
    ready = False
    text = None
    with contextlib.suppress(httpx.HTTPError, OSError), \
            httpx.Client(verify=verify_tls, timeout=timeout_s) as http:
        status = http.get(f"{base_url}/health").status_code
        if status in NOT_ROUTED:
            status = http.get(f"{base_url}/v1/models").status_code
        ready = status == 200
        resp = http.get(f"{base_url}/metrics")
        if resp.status_code == 200:
            text = resp.text
    return Observation(base_url, ready, start_time_from_metrics(text), single_id(text))


@dataclass
class RestartCheck:
    restarted: bool
    reasons: list[str] = field(default_factory=list)


def _changed(before: Observation | None, now: Observation) -> str | None:
    url = now.base_url
    if not now.ready:
        return f"{url} was not ready (readiness lost: restarting?)"
    if before is None:
        return f"no earlier observation of {url}"
    if before.server_id and now.server_id:
        if before.server_id != now.server_id:
            return f"{url} server id changed ({before.server_id} -> {now.server_id})"
        return None
    if before.server_id and not now.server_id:
        return f"{url} no longer exports its server id ({SERVER_INFO_METRIC})"
    if now.start_time is not None and not same_start(before.start_time, now.start_time):
        return (f"{url} process start time changed ({_iso(before.start_time)} -> "
                f"{_iso(now.start_time)})")
    if now.start_time is None and before.start_time is not None:
        return f"{url} no longer exports {START_METRIC}"
    return None


def detect_restart(previous: dict[str, Observation] | None,
                   now: list[Observation]) -> RestartCheck:
    """Did any server start anew since `previous` (url -> what was seen last)?

    The server id decides where both looks have one; else the process start time;
    else only a readiness loss shows a restart. `previous` None means we know nothing
    about the server (a new or resumed soak without a recorded start): treat it as a
    new start, so it gets primed.
    """
    if previous is None:
        return RestartCheck(True, ["no earlier observation of this server"])
    reasons = [r for obs in now if (r := _changed(previous.get(obs.base_url), obs))]
    return RestartCheck(bool(reasons), reasons)


@dataclass(frozen=True)
class Look:
    """What one /metrics snapshot said of the server's start."""

    server_id: str | None
    start_time: float | None

    @classmethod
    def of(cls, metrics_text: str | None) -> Look:
        return cls(single_id(metrics_text), start_time_from_metrics(metrics_text))


@dataclass(frozen=True)
class EndpointLooks:
    """An endpoint's start at the run's first and last look (server.json's snapshots)."""

    first: Look
    last: Look


def endpoint_looks(server_doc: dict[str, Any]) -> dict[str, EndpointLooks]:
    """Each endpoint's looks, from server.json as written."""
    return {url: EndpointLooks(*(Look.of(info.get(f"metrics_{label}")) for label in SNAPSHOTS))
            for url, info in (server_doc.get("servers") or {}).items()}


def last_seen(looks: dict[str, EndpointLooks],
              fallback: dict[str, Observation] | None = None) -> dict[str, Observation]:
    """What a run last saw of each server: its id and start time at the run's end (else
    its start), over what was observed before the run (`fallback`)."""
    seen = dict(fallback or {})
    for url, look in looks.items():
        known = seen.get(url)
        server_id = look.last.server_id or look.first.server_id
        start = next((s for s in (look.last.start_time, look.first.start_time) if s), None)
        seen[url] = Observation(
            url, True, start if start is not None else (known.start_time if known else None),
            server_id or (known.server_id if known else None))
    return seen


def restarted_during(looks: dict[str, EndpointLooks]) -> bool:
    """Did a server start anew between the run's first and last look at it?"""
    for look in looks.values():
        first, last = look.first, look.last
        if first.server_id and last.server_id:
            if first.server_id != last.server_id:
                return True
            continue
        if first.start_time is not None and last.start_time is not None and \
                not same_start(first.start_time, last.start_time):
            return True
    return False


# -- receipts of the measured server starts -------------------------------------------


def endpoint_start(base_url: str, info: dict[str, Any]) -> EndpointStart:
    """The server start(s) one endpoint named at the run's start and end, or why none."""
    texts = [info.get(f"metrics_{label}") for label in SNAPSHOTS]
    scraped = [t for t in texts if t is not None]
    per_snapshot = [server_ids(t) for t in scraped]
    ids = tuple(dict.fromkeys(i for found in per_snapshot for i in found))
    if not scraped:
        return EndpointStart(base_url, (), f"{base_url} did not answer GET /metrics, so "
                             "which server start it is cannot be known")
    if not ids:
        return EndpointStart(base_url, (), (
            f"{base_url} exports no server id ({SERVER_INFO_METRIC} in /metrics): the "
            "dsv4-qual plugin is not loaded in its API server, or is older than server "
            "ids, so no receipt can be tied to it"))
    if any(not found for found in per_snapshot):
        return EndpointStart(base_url, ids, (
            f"{base_url} exported no server id at the run's "
            f"{'start' if not per_snapshot[0] else 'end'} (and {', '.join(ids)} at the "
            "other end): the server measured changed during the run"))
    if any(len(found) > 1 for found in per_snapshot):
        return EndpointStart(base_url, ids, (
            f"{base_url} exports several server ids at once ({', '.join(ids)}): its "
            "/metrics mixes processes of several server starts (a PROMETHEUS_MULTIPROC_DIR "
            "kept across restarts?), so which receipts are its own cannot be told"))
    return EndpointStart(base_url, ids)


def _set_aside_reason(server_id: str | None, untied: list[EndpointStart]) -> str:
    if server_id is None:
        return ("names no server start (written by a dsv4-qual plugin older than server "
                "ids, or not by the plugin)")
    if any(server_id in e.server_ids for e in untied):
        return f"server id {server_id}: its endpoint cannot be tied to one server start"
    return (f"server id {server_id} is no measured endpoint's current start (an earlier "
            "start of the server, or another server)")


def select_receipts(server_doc: dict[str, Any]) -> dict[str, Any]:
    """server.json with each receipt tied to a measured endpoint's current start or set aside.

    Every receipt stays in `receipts` (forensics), marked `counted` (with the
    `endpoints` it belongs to) or not (with `set_aside`, the reason); the gate and the
    reports weigh the counted ones (`targets.facts`), `receipts_selection` says per
    endpoint which start it named and why a receipt was set aside, and
    `receipts_summary` states the counted ones for a person reading server.json.
    Idempotent: it reads only what the run recorded.
    """
    servers = server_doc.get("servers") or {}
    endpoints = [endpoint_start(url, info or {}) for url, info in servers.items()]
    tied = {e.base_url: e.server_ids for e in endpoints if not e.problem}
    untied = [e for e in endpoints if e.problem]
    kept, set_aside = [], []
    receipts = [dict(r) for r in server_doc.get("receipts") or []]
    for receipt in receipts:
        server_id = receipt_server_id(receipt)
        owners = [url for url, ids in tied.items() if server_id is not None and server_id in ids]
        receipt["counted"] = bool(owners)
        receipt.pop("set_aside", None)
        receipt.pop("endpoints", None)
        if owners:
            receipt["endpoints"] = owners
            kept.append(receipt)
        else:
            receipt["set_aside"] = _set_aside_reason(server_id, untied)
            set_aside.append(receipt)
    doc = dict(server_doc)
    doc["receipts"] = receipts
    dir_value, state = server_doc.get("receipts_dir"), server_doc.get("receipts_dir_state")
    doc["receipts_selection"] = ReceiptsSelection(
        receipts_dir=dir_value if isinstance(dir_value, str) else None,
        receipts_dir_state=state if isinstance(state, str) else None,
        basis="the server id each measured endpoint exports on /metrics "
              f"({SERVER_INFO_METRIC}) at the run's start and end",
        endpoints=tuple(endpoints),
        kept=len(kept),
        ignored=len(set_aside),
        ignored_files=tuple(str(r.get("file")) for r in set_aside[:LISTED_SET_ASIDE]),
        set_aside=tuple(SetAside(str(r.get("file")), str(r["set_aside"]))
                        for r in set_aside[:LISTED_SET_ASIDE]),
    ).to_dict()
    facts = ReceiptFacts.from_dicts(kept)
    doc["receipts_summary"] = facts.summary()
    doc["c128a_layout"], doc["c128a_layout_source"] = _layout(servers, facts.processes)
    return doc


def receipt_facts(selected: dict[str, Any]) -> ReceiptFacts:
    """The counted receipts of a selected server.json, with the endpoints and the rest."""
    selection = ReceiptsSelection.from_dict(selected.get("receipts_selection"))
    return ReceiptFacts.from_dicts(
        [r for r in selected.get("receipts") or [] if r.get("counted")],
        endpoints=list(selection.endpoints), set_aside=list(selection.set_aside),
        set_aside_count=selection.ignored)


def _layout(servers: dict[str, Any],
            processes: list[ProcessReceipt]) -> tuple[str | None, str | None]:
    """The layout the server ran, and where we learnt it: the layout gauge (the sim),
    else what the processes that run the model ran, else what every receipt asked for."""
    gauge = next((i.get("c128a_layout") for i in servers.values() if i.get("c128a_layout")),
                 None)
    if gauge:
        return gauge, "/metrics (dsv4_qual_c128a_layout_info)"
    ran = sorted({p.effective_layout for p in processes if p.runs_model and p.effective_layout})
    asked = sorted({p.layout for p in processes if p.layout})
    if ran or asked:
        return ",".join(ran or asked), "patch receipts"
    return None, None


def _iso(t: float | None) -> str:
    if t is None:
        return "unknown"
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")
