"""`dsv4-qual soak` and `history`: priming per server start, resume, history vs records."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from loadgen.commands.soak import SoakPlan, rounds_complete
from loadgen.durations import parse_duration
from loadgen.targets.epochs import Observation, detect_restart
from tests.loadgen.conftest import run_cli
from tests.support.cli import cli_command, cli_env
from tests.support.history_db import execute, query
from tests.support.scenario_files import write_scenario


def scenario(tmp_path: Path, measurement: int = 4) -> Path:
    return write_scenario(tmp_path / "soak.toml",
                          load={"concurrency": 2, "priming": 2, "measurement": measurement},
                          workload={"accounts": 64}, gate={"min_measured": 1},
                          telemetry={"scrape_interval_s": 0.2})


def rounds_in(db: Path | str) -> list[dict]:
    """Every round of the history (a SQLite path or a PostgreSQL URL), by soak and round."""
    return query(str(db), "SELECT * FROM rounds ORDER BY started, round")


def soak_dir(out: Path) -> Path:
    """The one soak under `out` (rounds live in <out>/<soak id>/round-NNNN)."""
    (only,) = [d for d in out.iterdir() if d.is_dir()]
    return only


def records(directory: Path) -> list[dict]:
    path = directory / "records.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("exposes_start_time,exposes_id,down_probes", [
    (True, False, 1), (False, False, 1), (False, True, 0)],
    ids=["process-start-time", "readiness-loss", "server-id"])
def test_priming_once_per_server_start(fake_server, tmp_path: Path, exposes_start_time: bool,
                                       exposes_id: bool, down_probes: int,
                                       history_target: str) -> None:
    fake, srv = fake_server(("ok",), expose_start_time=exposes_start_time,
                            expose_server_id=exposes_id)
    # The server restarts when round 2's last request (the 10th) arrives: with the
    # metrics the run sees its start time or its server id change; without them, the
    # next /health fails once. With the id, nothing else needs to show it.
    fake.restart_at = 10
    fake.restart_down_probes = down_probes
    out = tmp_path / "soak"
    proc = run_cli("soak", str(scenario(tmp_path)), "--base-url", srv.url, "--rounds", "3",
                   "--out", str(out), "--history", history_target, "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert fake.restarts == 1
    rows = rounds_in(history_target)
    assert [(r["round"], r["priming"], r["restart_detected"]) for r in rows] == [
        (1, 2, 1), (2, 0, 0), (3, 2, 1)]
    # 2 + 4, 4, 2 + 4: priming ran once per server start, never in between.
    assert sum(fake.counts.values()) == 16
    assert [len(records(soak_dir(out) / f"round-000{n}")) for n in (1, 2, 3)] == [6, 4, 6]
    if exposes_start_time:
        assert rows[2]["server_start"] == pytest.approx(fake.start_time)
        assert rows[0]["server_start"] < rows[2]["server_start"]
    else:
        assert rows[2]["server_start"] is None
        # The id moved between round 2's first and last look: round 3 primes.
        assert ("restarted during the previous round" if exposes_id else "not ready") in \
            proc.stdout
    assert (soak_dir(out) / "trend.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_restart_detection_rules() -> None:
    url = "http://s"

    def seen(start: float | None, server_id: str | None = None, ready: bool = True):
        return Observation(url, ready, start, server_id)

    assert detect_restart(None, [seen(100.0)]).restarted
    assert not detect_restart({url: seen(100.0)}, [seen(100.4)]).restarted
    moved = detect_restart({url: seen(100.0)}, [seen(200.0)])
    assert moved.restarted and "process start time changed" in moved.reasons[0]
    assert detect_restart({url: seen(None)}, [seen(None, ready=False)]).restarted
    assert not detect_restart({url: seen(None)}, [seen(None)]).restarted
    assert detect_restart({url: seen(100.0)}, [seen(None)]).restarted
    # The server id decides where both looks have one, whatever the start time says.
    new_id = detect_restart({url: seen(None, "a")}, [seen(None, "b")])
    assert new_id.restarted and "server id changed (a -> b)" in new_id.reasons[0]
    assert not detect_restart({url: seen(100.0, "a")}, [seen(300.0, "a")]).restarted
    assert detect_restart({url: seen(100.0, "a")}, [seen(100.0, "b")]).restarted
    gone = detect_restart({url: seen(100.0, "a")}, [seen(100.0)])
    assert gone.restarted and "no longer exports its server id" in gone.reasons[0]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_killed_soak_resumes_its_round_count(fake_server, tmp_path: Path, sig,
                                            history_target: str) -> None:
    fake, srv = fake_server(("ok",), token_delay_s=0.006)
    out = tmp_path / "soak"
    db = history_target
    per_round = 16
    args = ["soak", str(scenario(tmp_path, measurement=per_round)), "--base-url", srv.url,
            "--rounds", "2", "--out", str(out), "--history", db, "--quiet"]
    proc = subprocess.Popen(cli_command(*args), env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        round2 = list(out.glob("*/round-0002/records.jsonl"))
        if round2 and len(round2[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    if sig == signal.SIGTERM:
        assert proc.returncode == 130, stdout + stderr
        # The stop said once, not as "interrupted (interrupted)".
        assert ": interrupted; exit 130" in stdout and "(interrupted)" not in stdout, stdout
        assert [(r["round"], r["status"]) for r in rounds_in(db)] == [
            (1, "complete"), (2, "partial")]
    else:
        assert proc.returncode == -signal.SIGKILL
        assert [(r["round"], r["status"]) for r in rounds_in(db)] == [
            (1, "complete"), (2, "running")]
    served_before_resume = sum(fake.counts.values())

    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = rounds_in(db)
    # The count goes on: round 2 stays partial, round 3 is the second complete one.
    assert [(r["round"], r["status"]) for r in rows] == [
        (1, "complete"), (2, "partial"), (3, "complete")]
    assert rows[1]["note"]
    # Same server start: the resumed soak does not prime again.
    assert [r["priming"] for r in rows] == [2, 0, 0]
    cut = records(soak_dir(out) / "round-0002")
    done = [r for r in cut if r["verdicts"] != ["interrupted"]]
    assert len(done) >= 3
    assert rows[1]["measured"] == len(done)
    assert rows[1]["requests"] == len(cut)
    # A kill loses at most the requests in flight (concurrency 2); SIGTERM loses none.
    lost = served_before_resume - (2 + per_round) - len(cut)
    assert 0 <= lost <= (0 if sig == signal.SIGTERM else 2)
    assert len([r for r in cut if r["verdicts"] == ["interrupted"]]) <= 2
    soak = [(r["status"], r["exit_code"]) for r in query(db, "SELECT * FROM soaks")]
    assert soak == [("finished", 0)]
    assert sum(fake.counts.values()) == served_before_resume + per_round


def test_history_table_matches_the_records(fake_server, tmp_path: Path,
                                           history_target: str) -> None:
    _, srv = fake_server(("ok", "stuck", "ok", "loop", "empty", "ok", "truncated"))
    out = tmp_path / "soak"
    db = history_target
    proc = run_cli("soak", str(scenario(tmp_path, measurement=9)), "--base-url", srv.url,
                   "--rounds", "2", "--out", str(out), "--history", db, "--quiet")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # stuck replies fail the gate
    shown = run_cli("history", db, "--json")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)["rounds"]
    assert [r["round"] for r in rows] == [1, 2]
    fail_on = {"stuck_in_reasoning", "empty_content", "reasoning_loop", "token_leak",
               "truncated"}
    total_measured = total_failed = 0
    for row in rows:
        measured = [r for r in records(Path(row["results_dir"]))
                    if r["phase"] == "measurement"]
        counts = Counter(v for r in measured for v in set(r["verdicts"]))
        assert row["verdicts"] == dict(counts)
        assert row["measured"] == len(measured) == 9
        failed = sum(1 for r in measured if fail_on & set(r["verdicts"]))
        assert row["gated_failures"] == failed > 0
        total_measured += len(measured)
        total_failed += failed
    version = json.loads(shown.stdout)["versions"][0]
    assert version["vllm_version"] == "0.0.0-fake"
    assert (version["measured"], version["failures"]) == (total_measured, total_failed)
    table = run_cli("history", db, "--plot", str(tmp_path / "t.png"))
    assert table.returncode == 0, table.stderr
    assert f"soak {rows[0]['soak_id']}: rounds" in table.stdout  # one soak: its id once
    for row in rows:
        line = next(x for x in table.stdout.splitlines() if x.split()[:1] == [str(row["round"])])
        assert f" {row['gated_failures']}/{row['measured']} " in line
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_stop_on_breach_ends_the_soak_after_the_failing_round(fake_server, tmp_path: Path,
                                                              history_target: str) -> None:
    _, srv = fake_server(("ok", "ok", "ok", "stuck"))
    out = tmp_path / "soak"
    proc = run_cli("soak", str(scenario(tmp_path)), "--base-url", srv.url, "--rounds", "5",
                   "--out", str(out), "--history", history_target, "--stop-on-breach",
                   "--quiet")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = rounds_in(history_target)
    assert len(rows) == 1 and rows[0]["exit_code"] == 1
    assert json.loads((soak_dir(out) / "soak.json").read_text())["status"] == "stopped_on_breach"


def test_bad_input_is_one_line_and_exit_3(fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",))
    sc = str(scenario(tmp_path))
    cases = [
        (["soak", sc, "--base-url", srv.url], "needs --duration D or --rounds N"),
        (["soak", sc, "--base-url", srv.url, "--duration", "8hr"], "is not a duration"),
        (["soak", sc, "--duration", "1h"], "no target"),
        (["history", str(tmp_path / "absent.sqlite")], "no such history database"),
    ]
    not_db = tmp_path / "not.sqlite"
    not_db.write_text("hello, I am not a database" * 100)
    cases.append((["history", str(not_db)], "not a usable history database"))
    newer = tmp_path / "newer.sqlite"
    con = sqlite3.connect(newer)
    con.execute("PRAGMA user_version = 99")
    con.close()
    cases.append((["soak", sc, "--base-url", srv.url, "--rounds", "1", "--history", str(newer),
                   "--out", str(tmp_path / "o")], "history schema v99 is newer"))
    for args, message in cases:
        proc = run_cli(*args)
        assert proc.returncode == 3, (args, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert sum(fake.counts.values()) == 0


def test_the_same_command_the_next_night_starts_a_new_soak(fake_server, tmp_path: Path,
                                                           history_target: str) -> None:
    """Finished, or unfinished past its duration: never continued, never overwritten."""
    _, srv = fake_server(("ok",))
    out = tmp_path / "soak"
    db = history_target
    args = ["soak", str(scenario(tmp_path)), "--base-url", srv.url, "--rounds", "1",
            "--out", str(out), "--history", db, "--quiet"]
    assert run_cli(*args).returncode == 0
    assert run_cli(*args).returncode == 0
    # A soak killed last night (left `running`) whose duration has run out, where this
    # node keeps its own record: the history file, or the fleet database's local spool
    # (every node of a fleet has the same --out path: the shared database cannot say
    # which node's soak it is).
    own = str(out / "history-spool.sqlite") if db.startswith("postgresql") else db
    execute(own, "INSERT INTO soaks (soak_id, scenario, out_dir, started, status, duration_s, "
            "stop_on_breach) VALUES ('killed', 'soak', ?, ?, 'running', 3600, 0)",
            (str(out.resolve()), time.time() - 86400))
    proc = run_cli("soak", str(scenario(tmp_path)), "--base-url", srv.url, "--duration", "1h",
                   "--rounds", "1", "--out", str(out), "--history", db, "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "closed (expired)" in proc.stdout
    soaks = [(r["soak_id"], r["status"])
             for r in query(db, "SELECT soak_id, status FROM soaks ORDER BY started")]
    rounds = [(r["soak_id"], r["round"]) for r in query(db, "SELECT soak_id, round FROM rounds")]
    assert [status for _, status in soaks] == ["expired", "finished", "finished", "finished"]
    assert len({soak for soak, _ in rounds}) == 3 and {r for _, r in rounds} == {1}
    assert len([d for d in out.iterdir() if d.is_dir()]) == 3


def test_durations() -> None:
    assert parse_duration("8h") == 8 * 3600
    assert parse_duration("1h30m") == 5400
    assert parse_duration("45s") == parse_duration("45") == 45
    for bad in ("8hr", "", "h", "0s", "-5m", "5m3"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_a_soak_whose_requests_cannot_fit_stops_after_its_first_round(fake_server,
                                                                      tmp_path: Path) -> None:
    # Nothing can be sent to this ready server, and nothing would change by the next
    # round: one invalid round, then the soak stops and says why (no rounds spinning).
    fake, srv = fake_server(("ok",), max_model_len=32)
    out = tmp_path / "soak"
    proc = run_cli("soak", str(scenario(tmp_path)), "--base-url", srv.url, "--duration",
                   "1h", "--out", str(out), "--quiet")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert sum(fake.counts.values()) == 0
    assert len(rounds_in(tmp_path / "soak-history.sqlite")) == 1
    assert "round 1 sent nothing: server" in proc.stdout
    assert "max_model_len 32: max_tokens 64 alone is more than that" in proc.stdout


#: A sim soak: a long-context workload whose receipts must show the stride guard.
SIM_SOAK = {"target": {"sim": {"layout": "capacity", "max_model_len": 1024}},
            "load": {"priming": 2},
            "request": {"max_tokens": 160},
            "workload": {"kind": "long-context", "context_tokens": [96, 256]},
            "gate": {"prove_below": 0.5, "require_receipts": True,
                     "fail_on_stride_violations": True}}


def test_no_round_reads_the_receipt_before_its_builder_calls_reach_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sim soak whose rounds end before the stride guard's periodic flush (a fast round
    1 did, and was called invalid: "the C128A builder was not reached"). The flush is
    made rarer than any round here, so every round's gate reads the receipt before a
    periodic flush could come: each must still count every builder call its server made."""
    from server_patch.sim import server as sim_server

    monkeypatch.setattr(sim_server, "GUARD_FLUSH_S", 3600.0)
    sc = write_scenario(tmp_path / "sim-soak.toml", SIM_SOAK,
                        target={"receipts_dir": str(tmp_path / "receipts")})
    out = tmp_path / "soak"
    proc = run_cli("soak", str(sc), "--rounds", "2", "--out", str(out), "--quiet")
    for n in (1, 2):
        directory = soak_dir(out) / f"round-000{n}"
        gate = json.loads((directory / "summary.json").read_text())["gate"]
        server = json.loads((directory / "server.json").read_text())
        (counted,) = [r for r in server["receipts"] if r["counted"]]
        (info,) = server["servers"].values()
        served = info["tracked_after"]["c128a_builder_calls"]
        assert gate["exit_code"] == 0, (n, gate["reasons"])
        assert counted["guard"]["calls"] == served > 0
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_plans_and_stops_are_said_as_plans_and_counts() -> None:
    """The start line states a plan (never what reads as a result), in the right number."""
    assert SoakPlan(None, 6, False).describe() == "runs until 6 rounds are complete"
    assert SoakPlan(None, 1, False).describe() == "runs until 1 round is complete"
    assert SoakPlan(8 * 3600, None, False).describe() == "runs for 8h"
    assert SoakPlan(8 * 3600, 6, True).describe() == (
        "runs until 6 rounds are complete, for 8h at most, stopping at the first breach")
    assert rounds_complete(1) == "1 round complete"
    assert rounds_complete(6) == "6 rounds complete"


def test_every_line_a_round_prints_says_which_round(fake_server, tmp_path: Path) -> None:
    """Progress, waits, run-level lines (stderr) and each round's result (stdout) start
    with `round N:`; the soak's own lines say its plan and how it ended."""
    _, srv = fake_server(("ok",))
    proc = run_cli("soak", str(scenario(tmp_path)), "--base-url", srv.url, "--rounds", "2",
                   "--out", str(tmp_path / "soak"), "--history", str(tmp_path / "h.sqlite"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    progress = [line for line in proc.stderr.splitlines()
                if re.match(r"(round \d+: )?(priming|measurement|waiting)", line)]
    assert progress and all(re.match(r"round [12]: ", line) for line in progress), progress
    results = [line for line in proc.stdout.splitlines() if "PASSED" in line]
    assert [line.split(":")[0] for line in results] == ["round 1", "round 2"], results
    first = proc.stdout.splitlines()[0]
    assert "runs until 2 rounds are complete" in first, first
    assert re.search(r": finished \(2 rounds complete\); exit 0$", proc.stdout, re.M), \
        proc.stdout
    assert "complete rounds" not in proc.stdout + proc.stderr
