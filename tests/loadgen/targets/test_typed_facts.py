"""run.json's client and readiness, server.json's telemetry and devices: read typed.

Each is read back from the files as an older or another writer may have left them, and
written to summary.json with the keys it always had.
"""

from __future__ import annotations

import random
from dataclasses import asdict

from loadgen.results.run import RunFile
from loadgen.run_facts import ClientReport, ReadyProbe, RunFacts
from loadgen.targets.facts import ServerFacts
from loadgen.targets.receipts import Device
from loadgen.targets.telemetry_summary import GAUGES, summarize

SERVER_KEYS = {"samples", "seconds", "max_requests_running", "max_requests_waiting",
               "max_kv_cache_usage", "prompt_tokens", "generation_tokens",
               "prompt_tokens_per_s", "generation_tokens_per_s", "preemptions",
               "spec_accepted_tokens", "spec_draft_tokens", "spec_acceptance_rate",
               "prefix_cache_queries", "prefix_cache_hits", "process_starts_seen"}


def read_facts(run: object) -> RunFacts:
    """run.json's `run` as `report` reads it, through run.json's model."""
    return RunFile.model_validate({"run": run}).run


def test_an_older_run_json_reads_typed() -> None:
    facts = read_facts({
        "run_id": "r", "ready": [{"base_url": "http://a", "waited_s": 1.5,
                                  "readiness": "models"}, "junk", {"unknown": 1}],
        "client": {"cpu_s": 2.0, "saturated": True, "a_newer_key": 3}})
    assert facts.client == ClientReport(cpu_s=2.0, saturated=True)
    assert facts.ready == [ReadyProbe("http://a", 1.5, "models"), ReadyProbe(), ReadyProbe()]
    assert read_facts({"client": "not an object"}).client == ClientReport()
    again = read_facts(facts.to_dict())
    assert again.client == facts.client and again.ready == facts.ready


def test_what_an_older_writer_left_out_is_unknown() -> None:
    facts = read_facts({"started": 1700000000, "ready": "junk", "load": {}})
    assert (facts.run_id, facts.scenario, facts.base_urls, facts.node, facts.load,
            facts.ready) == ("", "", [], None, None, [])
    # A figure keeps its type: an int written is an int read, and written again so.
    assert facts.to_dict()["started"] == 1700000000
    assert type(facts.to_dict()["started"]) is int
    assert read_facts(None).run_id == ""
    assert RunFile.model_validate({}).run.node is None


def _samples(rng: random.Random) -> list[dict]:
    out = []
    for url in ("http://a", "http://b")[:rng.randint(1, 2)]:
        t, counters = 0.0, {"prompt_tokens": 0.0, "generation_tokens": 0.0,
                            "spec_accepted_tokens": 0.0, "spec_draft_tokens": 0.0}
        for _ in range(rng.randint(1, 6)):
            t += rng.uniform(0.5, 2)
            for key in counters:
                counters[key] += rng.randint(0, 50)
            point = {"server": url, "t": t, **counters}
            for gauge in GAUGES:
                if rng.random() < 0.7:
                    point[gauge] = rng.uniform(0, 8)
            out.append(point)
    return out


def test_telemetry_totals_are_the_servers_summed() -> None:
    rng = random.Random(5)
    for _ in range(100):
        summary = summarize({"samples": _samples(rng)})
        doc = summary.to_dict()
        for url, block in doc["servers"].items():
            assert set(block) == SERVER_KEYS
            assert block["samples"] == summary.servers[url].samples
        for key in ("prompt_tokens", "generation_tokens", "spec_draft_tokens"):
            said = [b[key] for b in doc["servers"].values() if b[key] is not None]
            assert doc["total"].get(key) == (sum(said) if said else None)
        drafted = summary.total.spec_draft_tokens
        assert summary.total.spec_acceptance_rate == (
            summary.total.spec_accepted_tokens / drafted if drafted else None)


def test_each_servers_samples_are_grouped_once_in_time_order() -> None:
    rng = random.Random(7)
    for _ in range(50):
        samples = _samples(rng)
        rng.shuffle(samples)
        grouped = ServerFacts.from_document({"samples": samples}).samples_by_server
        assert sorted(grouped) == sorted({s["server"] for s in samples})
        for url, points in grouped.items():
            assert points == sorted((s for s in samples if s["server"] == url),
                                    key=lambda s: s["t"])


def test_a_device_is_read_only_where_a_receipt_names_one() -> None:
    assert Device.from_dict({"name": "NVIDIA H200", "uuid": "GPU-1", "driver": 580}) == \
        Device("NVIDIA H200", "GPU-1", "580")
    assert Device.from_dict({"name": ""}) is None
    assert Device.from_dict(None) is None
    assert asdict(Device("x")) == {"name": "x", "uuid": None, "driver": None}
