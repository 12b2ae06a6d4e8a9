"""Server facts for server.json: models, version, /metrics over time, patch receipts.

A verdict about a server is only as good as what we know it ran: which vLLM, which
C128A layout (from the plugin's receipts), which server start answered (the id the
plugin exports on /metrics, read at the run's start and end: `epochs` ties receipts to
it), and how loaded it was while we measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from loadgen.background import cancel
from loadgen.targets.receipts import read_receipts, receipts_dir_state

# Prometheus series we keep, summed over their label sets. vLLM renamed a few over
# releases; every spelling seen is listed.
TRACKED_METRICS: dict[str, tuple[str, ...]] = {
    "requests_running": ("vllm:num_requests_running",),
    "requests_waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    # Prefix cache, in tokens (V1; older releases named them gpu_prefix_cache_*).
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
                             "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
                          "vllm:gpu_prefix_cache_hits_total"),
    "stride_violations": ("dsv4_qual_c128a_stride_violations_total",),
    "c128a_builder_calls": ("dsv4_qual_c128a_builder_calls_total",),
    "process_start_time": ("process_start_time_seconds",),
}


FIRST_SCRAPE_S = 0.5
#: The last look at the servers is bounded: one gone by then must not hold the reports.
AFTER_SNAPSHOT_TIMEOUT_S = 15.0
#: The gauge the dsv4-qual plugin (and the sim) export: which server start this is.
SERVER_INFO_METRIC = "dsv4_qual_server_info"


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum every sample of each metric family name (labels dropped)."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name_end = line.find("{")
        if name_end < 0:
            name_end = line.find(" ")
        if name_end <= 0:
            continue
        name = line[:name_end]
        value_part = line[line.rfind("}") + 1:] if "{" in line[:name_end + 1] else line[name_end:]
        fields = value_part.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        if math.isnan(value):
            continue
        sums[name] = sums.get(name, 0.0) + value
    return sums


#: Counters also kept per label set (an engine, a data-parallel rank, a replica behind
#: one URL): summed, an engine that accepts nothing hides beside one that accepts most.
PER_REPLICA = ("spec_draft_tokens", "spec_accepted_tokens")
#: Labels that name what is served, not which engine serves it.
NOT_A_REPLICA = frozenset({"model_name"})


def replica_counters(text: str) -> dict[str, dict[str, float]]:
    """The PER_REPLICA counters per label set (`engine=1`), read with Prometheus's own
    text parser; empty where the server exports one label set or none (the sum is then
    that one) or the text does not parse."""
    names = {name: key for key in PER_REPLICA for name in TRACKED_METRICS[key]}
    found: dict[str, dict[str, float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = names.get(sample.name)
                if key is None or math.isnan(sample.value):
                    continue
                replica = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items())
                                   if k not in NOT_A_REPLICA)
                slot = found.setdefault(replica, {})
                slot[key] = slot.get(key, 0.0) + sample.value
    except (ValueError, TypeError, IndexError, KeyError):
        return {}
    return found if len(found) > 1 else {}


def counters(text: str) -> dict[str, Any]:
    """What a sample or a phase mark keeps of a /metrics text: the tracked sums, and the
    per-replica counters where there are several replicas."""
    kept: dict[str, Any] = tracked(parse_prometheus(text))
    replicas = replica_counters(text)
    if replicas:
        kept["replicas"] = replicas
    return kept


def labelled(text: str, name: str) -> list[dict[str, str]]:
    """Label sets of one metric (e.g. the sim's `dsv4_qual_c128a_layout_info`)."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{"):
            body = line[len(name) + 1:line.rfind("}")]
            labels = {}
            for part in body.split(","):
                key, _, value = part.partition("=")
                if key:
                    labels[key.strip()] = value.strip().strip('"')
            out.append(labels)
    return out


def server_ids(text: str | None) -> list[str]:
    """The server ids a /metrics text names (`dsv4_qual_server_info{server_id=...}`),
    distinct, in order; one for a server start, none without the plugin."""
    if not text:
        return []
    found = (labels.get("server_id") for labels in labelled(text, SERVER_INFO_METRIC))
    return list(dict.fromkeys(i for i in found if i))


def tracked(sums: dict[str, float]) -> dict[str, float]:
    out = {}
    for key, names in TRACKED_METRICS.items():
        for name in names:
            if name in sums:
                out[key] = sums[name]
                break
    return out


async def fetch_metrics(http: httpx.AsyncClient, base_url: str) -> str | None:
    try:
        resp = await http.get(f"{base_url}/metrics", timeout=10.0)
    except (httpx.HTTPError, OSError):
        return None
    return resp.text if resp.status_code == 200 else None


async def fetch_json(http: httpx.AsyncClient, url: str) -> Any:
    try:
        resp = await http.get(url, timeout=10.0)
        if resp.status_code != 200:
            return None
        return resp.json()
    except (httpx.HTTPError, OSError, ValueError):
        return None


class Telemetry:
    """Collects the server facts of one run; written as server.json at the end."""

    def __init__(self, http: httpx.AsyncClient, base_urls: list[str],
                 receipts_dir: str | None, interval_s: float) -> None:
        self.http = http
        self.base_urls = base_urls
        self.receipts_dir = receipts_dir
        self.interval_s = interval_s
        self.servers: dict[str, dict[str, Any]] = {u: {} for u in base_urls}
        self.samples: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self._t0 = time.time()

    async def snapshot(self, label: str) -> None:
        for url in self.base_urls:
            info = self.servers[url]
            if label == "before":
                info["models"] = await fetch_json(self.http, f"{url}/v1/models")
                info["version"] = await fetch_json(self.http, f"{url}/version")
            text = await fetch_metrics(self.http, url)
            info[f"metrics_{label}"] = text
            if text is not None:
                info[f"tracked_{label}"] = tracked(parse_prometheus(text))
                # Before and after are points of the time series too (rates need both ends).
                self.samples.append({"t": time.time() - self._t0, "server": url,
                                     "label": label, **info[f"tracked_{label}"]})
                layout = labelled(text, "dsv4_qual_c128a_layout_info")
                if layout:
                    info["c128a_layout"] = layout[0].get("layout")
            info[f"server_ids_{label}"] = server_ids(text)

    async def mark(self, phase: str, edge: str) -> None:
        """The counters at a phase's start or end (`phase_marks`), so what happened in
        one phase (spec-decode acceptance alone vs under load) is a difference of two."""
        for url in self.base_urls:
            text = await fetch_metrics(self.http, url)
            if text is not None:
                marks = self.servers[url].setdefault("phase_marks", {})
                marks.setdefault(phase, {})[edge] = {"t": time.time() - self._t0,
                                                     **counters(text)}

    async def _scrape_forever(self) -> None:
        # Start fast (0.5, 1, 2, 4 s ...) up to the interval: a run of seconds still gets
        # samples of the server under load, not only the idle ones before and after.
        delay = min(FIRST_SCRAPE_S, self.interval_s)
        while True:
            await asyncio.sleep(delay)
            await self.sample()
            delay = min(delay * 2, self.interval_s)

    async def sample(self) -> None:
        for url in self.base_urls:
            text = await fetch_metrics(self.http, url)
            if text is not None:
                self.samples.append({"t": time.time() - self._t0, "server": url,
                                     **counters(text)})

    def start(self) -> None:
        if self.interval_s > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._scrape_forever())

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None

    async def begin(self) -> None:
        """The idle look at every server before anything is sent, then samples on the
        interval while the run sends."""
        await self.snapshot("before")
        self.start()

    async def end(self, timeout_s: float = AFTER_SNAPSHOT_TIMEOUT_S) -> None:
        """Sampling stopped, then the last look (whatever ended the run: a server that
        went away must not hold its reports, so the look is bounded and may find none)."""
        await self.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.snapshot("after"), timeout_s)

    @contextlib.asynccontextmanager
    async def phase(self, name: str) -> AsyncIterator[None]:
        """The counters at the phase's start and, when it ends without an error, at its
        end (`mark`)."""
        await self.mark(name, "start")
        yield
        await self.mark(name, "end")

    def document(self) -> dict[str, Any]:
        """server.json before the receipts of the current server start are picked
        (`epochs.select_receipts`)."""
        return {
            "servers": self.servers,
            "t0": self._t0,
            "samples": self.samples,
            "receipts_dir": self.receipts_dir,
            "receipts_dir_state": receipts_dir_state(self.receipts_dir),
            "receipts": read_receipts(self.receipts_dir),
        }
