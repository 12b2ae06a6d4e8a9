"""A real Prometheus (Debian's package) scrapes a running soak's `--metrics-port` and
evaluates the shipped docker/monitoring/alerts.yml: the breach alert fires when the
server starts failing, not while its rounds are clean, and what Prometheus stored
agrees with the soak's own results."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tests.loadgen.conftest import REPO
from tests.support.cli import cli_command, cli_env
from tests.support.prometheus import Prometheus
from tests.support.scenario_files import write_scenario
from tests.support.scrape import free_port

#: A real Prometheus: CI runs it (`pytest -m services`), the README's test command does not.
pytestmark = pytest.mark.services

T = TypeVar("T")
ALERTS = REPO / "docker" / "monitoring" / "alerts.yml"

SC = {"load": {"concurrency": 2, "priming": 4, "measurement": 6},
      "workload": {"accounts": 64}, "gate": {"min_measured": 1},
      "telemetry": {"scrape_interval_s": 0.5}}


def wait_for(what: str, check: Callable[[], T], timeout_s: float, every_s: float = 0.5) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {timeout_s} s")


def one(prom: Prometheus, expr: str) -> float:
    (sample,) = prom.query(expr)
    return float(sample["value"][1])


def test_prometheus_fires_the_breach_alert_on_a_soak_that_starts_failing(
        fake_server, tmp_path: Path) -> None:
    # Round 1 (4 priming + 6 measured) is clean; round 2's six replies (the same server
    # start: no priming) are stuck in reasoning: a breach.
    # Each stuck reply streams max_tokens at 20 ms a token: Prometheus, scraping every
    # 500 ms, sees round 1 judged before round 2 has a failure.
    fake, srv = fake_server(["ok"] * 10 + ["stuck"] * 6, token_delay_s=0.02)
    port = free_port()
    instance = f"127.0.0.1:{port}"
    write_scenario(tmp_path / "soak.toml", SC)
    out = tmp_path / "soak"
    with Prometheus(tmp_path / "prometheus", [instance], [ALERTS], interval="500ms") as prom:
        started = time.time()
        soak = subprocess.Popen(
            cli_command("soak", str(tmp_path / "soak.toml"), "--base-url", srv.url,
                        "--rounds", "2", "--out", str(out), "--quiet",
                        "--metrics-port", str(port), "--metrics-host", "127.0.0.1"),
            env={**cli_env(), "DSV4_QUAL_HOST": "gpu-node-7"}, cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for("the breach alert firing",
                     lambda: prom.firing("Dsv4QualGateBreach"), timeout_s=120)
            output, _ = soak.communicate(timeout=120)
        finally:
            if soak.poll() is None:
                soak.kill()
                soak.wait()
        assert soak.returncode == 1, output
        ended = time.time()
        (alert,) = prom.firing("Dsv4QualGateBreach")
        assert alert["labels"]["instance"] == instance
        assert alert["labels"]["severity"] == "critical"
        # The node, not only the scrape address: one Prometheus watches the fleet.
        assert alert["labels"]["node"] == "gpu-node-7"
        assert "on node gpu-node-7" in alert["annotations"]["summary"]

        # Not while the server was clean: Prometheus saw the clean round judged before
        # the alert first fired.
        def first(expr: str) -> float | None:
            series = prom.query_range(expr, started - 5, ended + 2, step=0.5)
            times = [float(t) for s in series for t, _ in s["values"]]
            return min(times) if times else None

        clean = first('dsv4_qual_rounds_total{outcome="passed"} == 1 '
                      'and ignoring (outcome) dsv4_qual_rounds_total{outcome="failed"} == 0')
        fired = first('ALERTS{alertname="Dsv4QualGateBreach", alertstate="firing"}')
        assert clean is not None and fired is not None and clean < fired

        # What it stored is what the soak wrote.
        rounds = sorted(out.glob("*/round-*"))
        assert len(rounds) == 2
        summaries = [json.loads((r / "summary.json").read_text()) for r in rounds]
        expected: Counter[tuple[str, str]] = Counter()
        for summary in summaries:
            for phase, stats in summary["phases"].items():
                for verdict, n in stats["primary_verdicts"].items():
                    expected[(phase, verdict)] += n
        stored = {(s["metric"]["phase"], s["metric"]["verdict"]): int(float(s["value"][1]))
                  for s in prom.query("last_over_time(dsv4_qual_requests_total[10m])")}
        assert stored == dict(expected)
        assert stored[("measurement", "stuck_in_reasoning")] == 6
        outcomes = {s["metric"]["outcome"]: float(s["value"][1])
                    for s in prom.query("last_over_time(dsv4_qual_rounds_total[10m])")}
        assert outcomes == {"passed": 1, "failed": 1, "invalid": 0, "interrupted": 0}
        last = summaries[-1]["gate"]
        assert one(prom, "last_over_time(dsv4_qual_last_gate_exit_code[10m])") == 1
        assert one(prom, "last_over_time(dsv4_qual_round[10m])") == 2
        assert one(prom, "last_over_time(dsv4_qual_round_failures[10m])") == last["failures"]
        assert one(prom, "last_over_time(dsv4_qual_round_measured[10m])") == last["measured"]
        assert one(prom, "last_over_time(dsv4_qual_round_failure_rate_upper_bound[10m])") == \
            pytest.approx(last["upper_bound_95"])
        # It said it had ended before it let go of the port: no "stopped reporting".
        assert one(prom, "last_over_time(dsv4_qual_running[10m])") == 0
        assert not [a for a in prom.alerts()
                    if a["labels"]["alertname"] == "Dsv4QualStoppedReporting"]
        assert sum(fake.counts.values()) == 16
