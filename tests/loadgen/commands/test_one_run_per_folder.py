"""One run per results folder: a second run, demo, qualify or soak aimed at a folder a run
is writing refuses at once with one line (exit 3), and no results file ever holds two
runs; a folder an earlier run left is never written again."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from loadgen.results import LOCK_FILE
from tests.support.cli import cli_command, cli_env, run_cli
from tests.support.scenario_files import write_scenario


def scenario(tmp_path: Path, measurement: int = 8) -> Path:
    return write_scenario(tmp_path / "s.toml", load={"measurement": measurement,
                                                     "concurrency": 2})


def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow  # a real process writes the folder for seconds while the second tries
@pytest.mark.parametrize("second", ["run", "demo", "qualify", "soak"])
def test_a_folder_being_written_refuses_a_second_writer_at_once(
        fake_server, tmp_path: Path, second: str) -> None:
    _, slow = fake_server(("ok",), token_delay_s=0.015)  # a run of a few seconds
    _, other = fake_server(("ok",))
    out = tmp_path / "out"
    first = subprocess.Popen(
        cli_command("run", str(scenario(tmp_path)), "--base-url", slow.url, "--out",
                    str(out), "--quiet"), env=cli_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_for(out / "run.json")
        args = {"run": ("run", str(scenario(tmp_path)), "--base-url", slow.url),
                "demo": ("demo", "--quiet"),
                "qualify": ("qualify", str(scenario(tmp_path)), "--control", slow.url,
                            "--candidate", other.url),
                "soak": ("soak", str(scenario(tmp_path)), "--rounds", "1", "--base-url",
                         slow.url)}[second]
        started = time.monotonic()
        proc = run_cli(*args, "--out", str(out))
        assert time.monotonic() - started < 5  # at once, not after the first run
        assert proc.returncode == 3, proc.stdout + proc.stderr
        line = proc.stderr.strip()
        assert len(line.splitlines()) == 1
        assert f"another dsv4-qual run (pid {first.pid}) is writing there" in line
    finally:
        first.communicate(timeout=60)
    assert first.returncode == 0
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 8 and len({r["run_id"] for r in records}) == 1
    assert not (out / "control").exists() and not (out / "soak.json").exists()
    rebuilt = run_cli("report", str(out))
    assert rebuilt.returncode == 0 and "0/8 failed" in rebuilt.stdout


@pytest.mark.parametrize("left", ["run.json", "qualify.json", "control", "candidate"])
def test_a_folder_an_earlier_run_left_is_never_written_again(
        fake_server, tmp_path: Path, left: str) -> None:
    fake, srv = fake_server()
    out = tmp_path / "out"
    out.mkdir()
    target = out / left
    if "." in left:
        target.write_text("{}")
    else:
        target.mkdir()
    proc = run_cli("run", str(scenario(tmp_path)), "--base-url", srv.url, "--out", str(out))
    assert proc.returncode == 3 and f"already holds an earlier run ({left})" in proc.stderr
    assert sum(fake.counts.values()) == 0 and not (out / "records.jsonl").exists()


def test_the_lock_is_let_go_when_a_run_ends(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server()
    for name in ("a", "b"):
        out = tmp_path / name
        assert run_cli("run", str(scenario(tmp_path)), "--base-url", srv.url, "--out",
                       str(out), "--quiet").returncode == 0
        assert (out / LOCK_FILE).exists()  # the file stays; nobody holds it
    # A soak resumes its own folder: held while it runs, let go when it ends.
    soak = tmp_path / "soak"
    for _ in range(2):
        proc = run_cli("soak", str(scenario(tmp_path)), "--rounds", "1", "--base-url",
                       srv.url, "--out", str(soak))
        assert proc.returncode == 0, proc.stdout + proc.stderr
