"""`--metrics-port`: what `run`, `soak` and `qualify` serve to Prometheus while they run,
and that it agrees with what the run wrote (summary.json, the history)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from loadgen.observe.metrics import LiveMetrics
from loadgen.scenario import load_scenario
from tests.loadgen.conftest import run_cli
from tests.support.receipts import api_server, receipt, write_receipts
from tests.support.scenario_files import write_scenario
from tests.support.scrape import by_label, free_port, scrape, scraping, value


def scenario(tmp_path: Path, measurement: int = 12, allowed: int = 0) -> Path:
    return write_scenario(tmp_path / "metrics.toml",
                          load={"priming": 4, "measurement": measurement},
                          workload={"accounts": 64},
                          gate={"min_measured": 1, "allowed": allowed},
                          telemetry={"scrape_interval_s": 0.2})


def primary_counts(summary: dict) -> dict[tuple[str, str], float]:
    return {(phase, verdict): float(n) for phase, p in summary["phases"].items()
            for verdict, n in p["primary_verdicts"].items() if n}


def test_a_run_serves_what_its_summary_says(fake_server, tmp_path: Path) -> None:
    """Requests by phase and verdict, the gate's figures, the receipts' layout and stride
    violations; the final values are scraped before the process lets go of the port."""
    fake, srv = fake_server(("ok", "ok", "stuck", "ok", "leak", "ok"), token_delay_s=0.005)
    receipts = write_receipts(tmp_path / "receipts", [
        api_server(1, fake.server_id), receipt(2, fake.server_id, layout="packed",
                                               violations=3)])
    port = free_port()
    out = tmp_path / "out"
    with scraping(port) as scraper:
        proc = run_cli("run", str(scenario(tmp_path)), "--base-url", srv.url, "--out",
                       str(out), "--quiet", "--receipts-dir", str(receipts),
                       "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    gate = summary["gate"]
    final = scraper.last
    assert by_label(final, "dsv4_qual_requests_total", "phase", "verdict") == \
        primary_counts(summary)
    assert value(final, "dsv4_qual_running") == 0
    assert value(final, "dsv4_qual_requests_in_flight") == 0
    assert value(final, "dsv4_qual_last_gate_exit_code") == 1
    assert by_label(final, "dsv4_qual_rounds_total", "outcome") == {("failed",): 1}
    assert value(final, "dsv4_qual_rounds_total", outcome="passed") == 0
    assert value(final, "dsv4_qual_round") == 1
    assert value(final, "dsv4_qual_round_failures") == gate["failures"] > 0
    assert value(final, "dsv4_qual_round_measured") == gate["measured"] == 12
    assert value(final, "dsv4_qual_round_allowed") == 0
    assert value(final, "dsv4_qual_round_failure_rate_upper_bound") == \
        pytest.approx(gate["upper_bound_95"])
    assert value(final, "dsv4_qual_round_prove_below") == 0.9
    assert value(final, "dsv4_qual_server_layout_info", layout="packed") == 1
    assert value(final, "dsv4_qual_server_stride_violations") == 3
    assert value(final, "dsv4_qual_server_receipts") == 1
    info = [labels for (name, labels) in final if name == "dsv4_qual_info"]
    assert dict(info[0])["command"] == "run" and dict(info[0])["role"] == "candidate"
    # While it ran: requests in flight, and the failures counted before the gate.
    during = [s for s in scraper.seen if value(s, "dsv4_qual_running") == 1]
    assert during
    assert max(value(s, "dsv4_qual_requests_in_flight") or 0 for s in during) > 0
    assert all((value(s, "dsv4_qual_requests_in_flight") or 0) <= 4 for s in scraper.seen)
    assert any((value(s, "dsv4_qual_round_failures") or 0) > 0 and
               value(s, "dsv4_qual_last_gate_exit_code") is None for s in during)
    assert ("dsv4_qual_phase", (("dsv4_qual_phase", "measurement"),)) in \
        {k for s in during for k, v in s.items() if v == 1}


def test_a_port_in_use_is_bad_input_before_anything_is_sent(fake_server,
                                                            tmp_path: Path) -> None:
    fake, srv = fake_server()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = tmp_path / "out"
        for command in (["run"], ["soak", "--rounds", "1"]):
            proc = run_cli(*command, str(scenario(tmp_path)), "--base-url", srv.url,
                           "--out", str(out), "--metrics-port", str(port),
                           "--metrics-host", "127.0.0.1")
            assert proc.returncode == 3, proc.stdout + proc.stderr
            (line,) = proc.stderr.strip().splitlines()
            assert f"--metrics-port {port}" in line and "in use" in line, line
    assert sum(fake.counts.values()) == 0
    assert not out.exists()


def test_a_soak_counts_its_rounds_and_requests(fake_server, tmp_path: Path) -> None:
    """Across rounds: the round number, outcomes, requests of every round; the live
    failures restart from zero each round."""
    # 4 + 6 ok, then 6 stuck: round 1 passes, round 2 breaches.
    _, srv = fake_server(["ok"] * 10 + ["stuck"] * 6)
    port = free_port()
    out = tmp_path / "soak"
    with scraping(port) as scraper:
        proc = run_cli("soak", str(scenario(tmp_path, measurement=6)), "--base-url", srv.url,
                       "--rounds", "2", "--out", str(out), "--quiet",
                       "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    final = scraper.last
    assert by_label(final, "dsv4_qual_rounds_total", "outcome") == {("passed",): 1,
                                                                    ("failed",): 1}
    assert value(final, "dsv4_qual_round") == 2
    assert value(final, "dsv4_qual_round_failures") == 6
    assert value(final, "dsv4_qual_last_gate_exit_code") == 1
    assert by_label(final, "dsv4_qual_requests_total", "phase", "verdict") == {
        ("priming", "ok"): 4, ("measurement", "ok"): 6,
        ("measurement", "stuck_in_reasoning"): 6}
    assert value(final, "dsv4_qual_running") == 0
    info = dict(next(labels for (name, labels) in final if name == "dsv4_qual_info"))
    assert info["command"] == "soak"
    # Between the rounds the last gate passed and nothing of round 2 had failed yet.
    assert any(value(s, "dsv4_qual_last_gate_exit_code") == 0 for s in scraper.seen)


def test_qualify_serves_each_sides_run_in_turn_with_its_node(
        fake_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 1 the control (it reproduces: its gate passes), round 2 the candidate; the
    node the alerts name is in dsv4_qual_info."""
    monkeypatch.setenv("DSV4_QUAL_HOST", "gb300-rack2-n07")
    _, control = fake_server(["stuck"] * 16)
    _, candidate = fake_server(["ok"] * 16)
    port = free_port()
    with scraping(port) as scraper:
        proc = run_cli("qualify", str(scenario(tmp_path)), "--control", control.url,
                       "--candidate", candidate.url, "--out", str(tmp_path / "q"), "--quiet",
                       "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    final = scraper.last
    assert value(final, "dsv4_qual_round") == 2
    assert by_label(final, "dsv4_qual_rounds_total", "outcome") == {("passed",): 2}
    assert value(final, "dsv4_qual_round_failures") == 0  # the candidate's, last
    assert any(value(s, "dsv4_qual_round") == 1 and value(s, "dsv4_qual_round_failures")
               for s in scraper.seen)  # the control's, first
    info = dict(next(labels for (name, labels) in final if name == "dsv4_qual_info"))
    assert (info["command"], info["node"]) == ("qualify", "gb300-rack2-n07")


@pytest.mark.slow  # worker processes
def test_workers_are_counted_in_the_parent(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok", "stuck"))
    port = free_port()
    out = tmp_path / "out"
    with scraping(port, interval_s=0.2) as scraper:
        proc = run_cli("run", str(scenario(tmp_path, measurement=10)), "--base-url", srv.url,
                       "--out", str(out), "--quiet", "--workers", "2",
                       "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert by_label(scraper.last, "dsv4_qual_requests_total", "phase", "verdict") == \
        primary_counts(summary)
    assert sum(primary_counts(summary).values()) == 14


def test_close_waits_for_one_last_scrape_only_when_someone_scrapes() -> None:
    """Nobody scraped: the command ends at once. A scraper: it gets the final values."""
    sc = load_scenario("smoke")
    idle = LiveMetrics("run", sc)
    idle.serve(0, "127.0.0.1")
    t0 = time.monotonic()
    idle.close()
    assert time.monotonic() - t0 < 1

    metrics = LiveMetrics("run", sc)
    metrics.serve(0, "127.0.0.1")
    port = metrics.port
    assert port
    assert value(scrape(port), "dsv4_qual_running") == 1
    closing = threading.Thread(target=metrics.close)
    closing.start()
    time.sleep(0.3)
    assert closing.is_alive()  # waiting for the scraper
    last = scrape(port)
    closing.join(timeout=5)
    assert not closing.is_alive()
    assert value(last, "dsv4_qual_running") == 0
    with pytest.raises(OSError):
        scrape(port, timeout=1)


def test_live_failures_and_their_bound_follow_the_gated_verdicts() -> None:
    sc = load_scenario("smoke")
    metrics = LiveMetrics("run", sc)
    metrics.serve(0, "127.0.0.1")
    try:
        metrics.run_started(sc)
        metrics.phase_started("priming", 2)
        metrics.request_done("priming", ["stuck_in_reasoning"])  # priming is never gated
        metrics.phase_started("measurement", 3)
        metrics.request_done("measurement", ["ok"])
        metrics.request_done("measurement", ["stuck_in_reasoning", "truncated"])
        metrics.request_done("measurement", ["divergent"])  # not gated by default
        metrics.request_done("measurement", ["interrupted"])  # not measured
        metrics.request_done("measurement", ["http_error"])  # no reply: not in the rate
        assert metrics.port
        now = scrape(metrics.port)
        assert value(now, "dsv4_qual_round_measured") == 3
        assert value(now, "dsv4_qual_round_failures") == 1
        from loadgen.bounds import upper_bound

        assert value(now, "dsv4_qual_round_failure_rate_upper_bound") == \
            pytest.approx(upper_bound(1, 3))
        assert value(now, "dsv4_qual_last_gate_exit_code") is None  # no gate yet
        assert by_label(now, "dsv4_qual_requests_total", "phase", "verdict") == {
            ("priming", "stuck_in_reasoning"): 1, ("measurement", "ok"): 1,
            ("measurement", "stuck_in_reasoning"): 1, ("measurement", "divergent"): 1,
            ("measurement", "interrupted"): 1, ("measurement", "http_error"): 1}
        assert value(now, "dsv4_qual_phase", dsv4_qual_phase="measurement") == 1
        assert value(now, "dsv4_qual_rounds_total", outcome="invalid") == 0
    finally:
        metrics.close(linger=False)
