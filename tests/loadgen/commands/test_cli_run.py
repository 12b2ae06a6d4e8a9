"""`dsv4-qual run` / `report`: exit codes, interruption, rebuilt reports, bad directories."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.loadgen.conftest import run_cli
from tests.support.cli import cli_command, cli_env
from tests.support.scenario_files import write_scenario

#: A few seconds' run: the helper's default, primed, with a ready timeout of its own.
SMALL = {"load": {"priming": 2}, "gate": {"min_measured": 1}}


def scenario(tmp_path: Path, ready: float = 30, measurement: int = 8, **tables: Any) -> Path:
    return write_scenario(tmp_path / "small.toml", SMALL,
                          {"target": {"ready_timeout_s": ready},
                           "load": {"measurement": measurement}}, **tables)


def free_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_server_never_ready_exits_2_with_reports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = run_cli("run", str(scenario(tmp_path, ready=2)), "--base-url",
                   f"http://127.0.0.1:{free_port()}", "--out", str(out), "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert time.monotonic() - t0 < 30
    summary = json.loads((out / "summary.json").read_text())
    assert "not ready after 2 s" in summary["run"]["invalid"]
    assert summary["gate"]["exit_code"] == 2
    assert "RUN INVALID" in proc.stdout


def test_unwritable_results_dir_exits_3_before_sending(fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli("run", str(scenario(tmp_path)), "--base-url", srv.url,
                   "--out", str(blocker / "sub"))
    assert proc.returncode == 3 and "not writable" in proc.stderr
    assert sum(fake.counts.values()) == 0


def test_existing_results_are_never_overwritten(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server()
    out = tmp_path / "out"
    assert run_cli("run", str(scenario(tmp_path)), "--base-url", srv.url, "--out", str(out),
                   "--quiet").returncode == 0
    before = (out / "records.jsonl").read_bytes()
    proc = run_cli("run", str(scenario(tmp_path)), "--base-url", srv.url, "--out", str(out))
    assert proc.returncode == 3 and "already holds" in proc.stderr
    assert (out / "records.jsonl").read_bytes() == before


def test_missing_api_key_env_exits_3(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server()
    sc = scenario(tmp_path, target={"api_key_env": "DSV4_TEST_KEY"})
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "o"),
                   env={"DSV4_TEST_KEY": None})
    assert proc.returncode == 3 and "DSV4_TEST_KEY is not set" in proc.stderr
    assert not (tmp_path / "o").exists()  # nothing was created for a run that never ran


def test_api_key_is_sent_and_never_written(fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server()
    sc = scenario(tmp_path, target={"api_key_env": "K_VAR"})
    secret = "sk-live-7f3e9a-do-not-leak"
    out = tmp_path / "o"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out),
                   env={"K_VAR": secret})
    assert proc.returncode == 0, proc.stderr
    assert all(h.get("authorization") == f"Bearer {secret}" for h in fake.headers)
    for f in out.iterdir():
        assert secret not in f.read_text(errors="replace"), f.name
    assert secret not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_sigint_keeps_finished_records_and_exits_130(fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",), token_delay_s=0.02)
    out = tmp_path / "out"
    cmd = cli_command("run", str(scenario(tmp_path, measurement=400)),
                      "--base-url", srv.url, "--out", str(out), "--quiet")
    proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    records = out / "records.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if records.exists() and len(records.read_text().splitlines()) >= 10:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    done = [r for r in lines if r["verdicts"] != ["interrupted"]]
    cut = [r for r in lines if r["verdicts"] == ["interrupted"]]
    assert len(done) >= 10 and 1 <= len(cut) <= 4
    assert all(r["error"].startswith("interrupted") for r in cut)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gate"]["exit_code"] == 130
    assert summary["run"]["interrupted"] == "interrupted by SIGINT"
    assert (out / "report.md").exists() and (out / "junit.xml").exists()
    # The server saw exactly the requests that were recorded.
    assert sum(fake.counts.values()) == len(lines)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_sigterm_is_an_interrupt_too(fake_server, tmp_path: Path, sig) -> None:
    _, srv = fake_server(("ok",), token_delay_s=0.02)
    out = tmp_path / "out"
    cmd = cli_command("run", str(scenario(tmp_path, measurement=400)),
                      "--base-url", srv.url, "--out", str(out), "--quiet")
    proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    records = out / "records.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (records.exists() and records.stat().st_size):
        time.sleep(0.1)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode == 130


def test_report_rebuilds_from_records_and_tolerates_a_torn_line(fake_server, tmp_path):
    _, srv = fake_server(("ok", "stuck"))
    out = tmp_path / "out"
    proc = run_cli("run", str(scenario(tmp_path)), "--base-url", srv.url, "--out", str(out),
                   "--quiet")
    assert proc.returncode == 1
    original = json.loads((out / "summary.json").read_text())
    for name in ("summary.json", "report.md", "junit.xml", "report.html"):
        (out / name).unlink()
    with open(out / "records.jsonl", "ab") as fh:
        fh.write(b'{"run_id": "torn", "phase": "measurem')  # a writer killed mid-line
    proc = run_cli("report", str(out))
    assert proc.returncode == 1, proc.stderr
    rebuilt = json.loads((out / "summary.json").read_text())
    assert rebuilt["phases"] == original["phases"]
    assert rebuilt["gate"] == original["gate"]
    for name in ("report.md", "junit.xml", "report.html"):
        assert (out / name).exists()


def test_report_on_a_non_results_dir_exits_3(tmp_path: Path) -> None:
    proc = run_cli("report", str(tmp_path))
    assert proc.returncode == 3 and "not a dsv4-qual results directory" in proc.stderr


def test_round_robin_over_base_urls(fake_server, tmp_path: Path) -> None:
    a, sa = fake_server()
    b, sb = fake_server()
    out = tmp_path / "out"
    proc = run_cli("run", str(scenario(tmp_path)), "--base-url", sa.url, "--base-url", sb.url,
                   "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert sum(a.counts.values()) == 5 and sum(b.counts.values()) == 5
    lines = (out / "records.jsonl").read_text().splitlines()
    endpoints = {json.loads(x)["endpoint"] for x in lines}
    assert endpoints == {sa.url, sb.url}


def test_results_root_from_the_environment(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server()
    root = tmp_path / "volume"
    proc = run_cli("run", str(scenario(tmp_path)), "--base-url", srv.url, "--quiet",
                   env={"DSV4_QUAL_RESULTS_ROOT": str(root)})
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = root.iterdir()
    assert run_dir.name.startswith("small-") and (run_dir / "summary.json").is_file()


def test_rate_limit_paces_sends(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server()
    out = tmp_path / "out"
    sc = write_scenario(tmp_path / "rate.toml", SMALL, target={"ready_timeout_s": 30},
                        load={"concurrency": 20, "priming": 0, "measurement": 20})
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out",
                   str(out), "--quiet", "--rate-limit", "10", "--accept-weaker-load")
    assert proc.returncode == 0, proc.stderr
    sent = sorted(json.loads(x)["timings"]["sent"]
                  for x in (out / "records.jsonl").read_text().splitlines())
    # 20 requests at 10/s: the last is sent ~1.9 s after the first, not all at once.
    assert sent[-1] - sent[0] >= 1.7
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert max(gaps) < 0.5  # paced, not bursty
