"""The history as a fleet's: what each round ran on, old files migrated, invalid rounds
never pooled, change points, and PostgreSQL with several writers and an outage."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from loadgen.commands.history import trend
from loadgen.history import History, RoundRow, Soak
from loadgen.history.changes import segments
from loadgen.report.trend import round_table, trend_figure
from tests.loadgen.commands.test_soak import scenario
from tests.loadgen.conftest import run_cli
from tests.support.cli import cli_command, cli_env
from tests.support.history_db import query
from tests.support.receipts import api_server, parallel, receipt, write_receipts

DIGEST = "sha256:" + "ab" * 32
NODE_ENV = {"DSV4_QUAL_HOST": "gb300-node-07", "DSV4_QUAL_SERVER_IMAGE":
            "dsv4-qual-server:v0.27.1", "DSV4_QUAL_SERVER_IMAGE_DIGEST": "@" + DIGEST}


def _worker(pid: int, server_id: str, rank: int, uuid: str) -> dict:
    data = receipt(pid, server_id, model="deepseek-ai/DeepSeek-V4-Flash-0731",
                   revision="7872f01b1d1f", place=parallel(world=2, rank=rank))
    data["model"]["device"] = {"name": "NVIDIA GB300", "uuid": uuid, "driver": "580.65.06"}
    return data


def test_every_round_records_what_it_ran_on(fake_server, tmp_path: Path,
                                            history_target: str) -> None:
    fake, srv = fake_server(("ok",), expose_server_id=True)
    receipts = write_receipts(tmp_path / "r", [
        api_server(1, fake.server_id), _worker(2, fake.server_id, 0, "GPU-a"),
        _worker(3, fake.server_id, 1, "GPU-b")])
    sc = str(scenario(tmp_path))
    common = ["--receipts-dir", str(receipts), "--history", history_target, "--quiet"]
    assert run_cli("soak", sc, "--base-url", srv.url, "--rounds", "2", "--out",
                   str(tmp_path / "a"), *common, env=NODE_ENV).returncode == 0
    # The same protocol through another URL: the same hash; more concurrency: another.
    _, other = fake_server(("ok",))
    assert run_cli("soak", sc, "--base-url", other.url, "--rounds", "1", "--out",
                   str(tmp_path / "b"), "--history", history_target, "--quiet",
                   env={"DSV4_QUAL_HOST": "b200-node-02"}).returncode == 0
    assert run_cli("soak", sc, "--base-url", other.url, "--rounds", "1", "--out",
                   str(tmp_path / "c"), "--concurrency", "3", "--history", history_target,
                   "--quiet", env={"DSV4_QUAL_HOST": "b200-node-02"}).returncode == 0

    rows = query(history_target, "SELECT * FROM rounds ORDER BY started")
    first = rows[0]
    assert (first["host"], first["gpu_name"], first["gpu_count"], first["gpu_driver"]) == (
        "gb300-node-07", "NVIDIA GB300", 2, "580.65.06")
    assert (first["image"], first["image_digest"]) == ("dsv4-qual-server:v0.27.1", DIGEST)
    assert (first["model"], first["model_revision"]) == (
        "deepseek-ai/DeepSeek-V4-Flash-0731", "7872f01b1d1f")
    assert first["vllm_version"] and first["c128a_layout"]
    # What nobody reported stays unknown: no receipts, no image, no GPU on node 2.
    bare = rows[2]
    assert (bare["host"], bare["gpu_name"], bare["gpu_count"], bare["gpu_driver"],
            bare["image"], bare["image_digest"], bare["model_revision"]) == (
        "b200-node-02", None, None, None, None, None, None)
    assert bare["model"]  # /v1/models names it
    hashes = [r["scenario_hash"] for r in rows]
    assert len(hashes[0]) == 64 and hashes[0] == hashes[1] == hashes[2] != hashes[3]

    def shown(*args: str) -> dict:
        proc = run_cli("history", history_target, "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    assert len(shown("--host", "gb300-node-07")["rounds"]) == 2
    assert len(shown("--gpu", "NVIDIA GB300", "--driver", "580.65.06")["rounds"]) == 2
    assert len(shown("--gpu", "unknown")["rounds"]) == 2
    assert len(shown("--image", DIGEST)["rounds"]) == 2
    assert len(shown("--scenario-hash", hashes[3][:12])["rounds"]) == 1
    assert len(shown("--model", "deepseek-ai/DeepSeek-V4-Flash-0731",
                     "--revision", "7872f01b1d1f")["rounds"]) == 2
    groups = shown("--group-by", "host", "--group-by", "scenario-hash")["groups"]
    assert sorted((g["group"]["host"], g["rounds"]) for g in groups) == [
        ("b200-node-02", 1), ("b200-node-02", 1), ("gb300-node-07", 2)]
    table = run_cli("history", history_target, "--group-by", "gpu",
                    "--plot", str(tmp_path / "t.png"))
    assert "per gpu (valid rounds pooled)" in table.stdout and "NVIDIA GB300" in table.stdout
    assert "host" in table.stdout  # rounds of two hosts: the table says whose


#: The round table of today's main (schema v1), as it created it.
V1_SCHEMA = """
CREATE TABLE soaks (soak_id TEXT PRIMARY KEY, scenario TEXT NOT NULL, out_dir TEXT NOT NULL,
    started REAL NOT NULL, ended REAL, status TEXT NOT NULL, duration_s REAL,
    rounds_target INTEGER, stop_on_breach INTEGER NOT NULL DEFAULT 0, exit_code INTEGER,
    tool_version TEXT);
CREATE INDEX soaks_by_target ON soaks (scenario, out_dir);
CREATE TABLE rounds (soak_id TEXT NOT NULL REFERENCES soaks (soak_id), round INTEGER NOT NULL,
    status TEXT NOT NULL, note TEXT, started REAL NOT NULL, ended REAL, scenario TEXT NOT NULL,
    results_dir TEXT NOT NULL, run_id TEXT, vllm_version TEXT, c128a_layout TEXT,
    server_start REAL, server_starts TEXT, restart_detected INTEGER NOT NULL DEFAULT 0,
    server_restarts INTEGER, priming INTEGER NOT NULL DEFAULT 0, requests INTEGER,
    measured INTEGER, gated_failures INTEGER, allowed INTEGER, role TEXT,
    upper_bound_95 REAL, lower_bound_95 REAL, exit_code INTEGER, ttft_p50 REAL,
    ttft_p90 REAL, ttft_p99 REAL, itl_p50 REAL, itl_p99 REAL, e2e_p50 REAL, e2e_p99 REAL,
    tokens_per_s REAL, PRIMARY KEY (soak_id, round));
CREATE INDEX rounds_by_start ON rounds (started);
CREATE TABLE round_verdicts (soak_id TEXT NOT NULL, round INTEGER NOT NULL,
    phase TEXT NOT NULL, verdict TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (soak_id, round, phase, verdict),
    FOREIGN KEY (soak_id, round) REFERENCES rounds (soak_id, round));
PRAGMA user_version = 1;
"""


def test_a_history_of_the_first_schema_opens_and_gains_the_new_columns(
        fake_server, tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.executescript(V1_SCHEMA)
    con.execute("INSERT INTO soaks VALUES ('old-1', 'soak', '/r', 1.0e9, 1.0e9, 'finished', "
                "NULL, 1, 0, 0, '0.1.0')")
    con.execute("INSERT INTO rounds (soak_id, round, status, started, scenario, results_dir, "
                "vllm_version, measured, gated_failures, exit_code) VALUES "
                "('old-1', 1, 'complete', 1.0e9, 'soak', '/r/1', '0.27.1', 512, 0, 0)")
    con.execute("INSERT INTO round_verdicts VALUES ('old-1', 1, 'measurement', 'ok', 512)")
    con.commit()
    con.close()
    # Read: the old round is there, what it never recorded is unknown.
    shown = run_cli("history", str(db), "--json")
    assert shown.returncode == 0, shown.stderr
    (old,) = json.loads(shown.stdout)["rounds"]
    assert old["verdicts"] == {"ok": 512} and old["host"] is None and old["outcome"] == "complete"
    # Written: a soak appends to it, with every new fact.
    _, srv = fake_server(("ok",))
    proc = run_cli("soak", str(scenario(tmp_path)), "--base-url", srv.url, "--rounds", "1",
                   "--out", str(tmp_path / "o"), "--history", str(db), "--quiet",
                   env={"DSV4_QUAL_HOST": "node-1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    rows = con.execute("SELECT soak_id, host, scenario_hash FROM rounds ORDER BY started"
                       ).fetchall()
    con.close()
    assert rows[0] == ("old-1", None, None)
    assert rows[1][1] == "node-1" and len(rows[1][2]) == 64


def test_invalid_and_partial_rounds_are_shown_and_never_pooled(fake_server,
                                                               tmp_path: Path) -> None:
    # Round 1: 2 primed + 4 measured, clean; round 2: every request a 500 (invalid,
    # exit 2: no measured reply); round 3 clean again. The errors are within the limit,
    # so round 2 sends all 4 and round 3 meets the fake's next clean requests.
    _, srv = fake_server(("ok",) * 6 + ("http_500",) * 4)
    db = tmp_path / "h.sqlite"
    sc = scenario(tmp_path)
    sc.write_text(sc.read_text().replace("min_measured = 1", "min_measured = 1\n"
                                         "max_infra_errors = 4"))
    proc = run_cli("soak", str(sc), "--base-url", srv.url, "--rounds", "3",
                   "--out", str(tmp_path / "o"), "--history", str(db), "--quiet")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    doc = json.loads(run_cli("history", str(db), "--json").stdout)
    assert [(r["round"], r["outcome"], r["exit_code"], r["pooled"]) for r in doc["rounds"]] == [
        (1, "complete", 0, True), (2, "invalid", 2, False), (3, "complete", 0, True)]
    (version,) = doc["versions"]
    assert (version["rounds"], version["measured"], version["invalid"]) == (2, 8, 1)
    table = run_cli("history", str(db), "--plot", str(tmp_path / "t.png")).stdout
    line = next(x for x in table.splitlines() if x.split()[:1] == ["2"])
    assert "invalid" in line.split() and line.split()[-1] == "2"
    assert "1 invalid" in table  # the version's rounds say what was left out

    # A partial round (interrupted) too: listed, marked, not pooled.
    rows = [RoundRow.from_row(r) for r in doc["rounds"] + [{
        **doc["rounds"][0], "round": 4, "status": "partial", "exit_code": 130,
        "started": doc["rounds"][-1]["started"] + 1}]]
    result = trend(rows, ["vllm"])
    assert result.versions[0].rounds == 2 and result.versions[0].partial == 1
    text = _render(round_table(rows, 200))
    assert "partial" in text and "130" in text
    labels = trend_figure(rows).axes[0].get_legend_handles_labels()[1]
    assert "invalid round (not pooled)" in labels and "partial round (not pooled)" in labels


def _render(table: object) -> str:
    import io

    from rich.console import Console

    out = Console(file=io.StringIO(), width=200, record=True)
    out.print(table)
    return out.export_text()


def _synthetic(db: Path, rounds: list[dict]) -> None:
    history = History(db)
    soaks: set[str] = set()
    for i, r in enumerate(rounds):
        soak = r.get("soak", "s")
        if soak not in soaks:
            history.add_soak(Soak(soak, "nightly", "/r", float(i), "finished", None, None,
                                  False), "test")
            soaks.add(soak)
        history.start_round(soak, i + 1, started=1_796_000_000.0 + i * 3600,
                            scenario="nightly", results_dir=f"/r/{i}", priming=0,
                            restart_detected=False, server_starts={},
                            identity={"host": r.get("host", "node-1"),
                                      "image_digest": r.get("digest")})
        history.finish_round(soak, i + 1, status="complete", note=None, ended=0.0,
                             results={"vllm_version": r["vllm"], "measured": r["n"],
                                      "gated_failures": r["f"], "exit_code": int(r["f"] > 2)},
                             verdicts={})
    history.close()


def test_change_points_are_found_where_the_rate_changed_and_nowhere_else(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    # node-1: six clean-ish rounds of 0.28.0, then a new image and ~2% failures; node-2
    # scatters around 0.2% all along; 0.27.1 (earlier, node-3) fails ~6%.
    rounds = [{"vllm": "0.27.1", "host": "node-3", "n": 512,
               "f": int(rng.binomial(512, 0.06))} for _ in range(4)]
    for i in range(10):
        rounds.append({"vllm": "0.28.0", "host": "node-1", "n": 512,
                       "digest": "sha256:" + ("11" if i < 6 else "22") * 32,
                       "f": int(rng.binomial(512, 0.001 if i < 6 else 0.02))})
        rounds.append({"vllm": "0.28.0", "host": "node-2", "n": 512,
                       "f": int(rng.binomial(512, 0.002))})
    db = tmp_path / "h.sqlite"
    _synthetic(db, rounds)
    proc = run_cli("history", str(db), "--json", "--group-by", "host")
    assert proc.returncode == 0, proc.stderr
    changes = json.loads(proc.stdout)["change_points"]
    (found,) = changes["rounds"]
    assert found["series"] == "host node-1"
    assert found["round"] == 4 + 2 * 6 + 1  # node-1's seventh round
    assert found["changed"] == {"image_digest": ["sha256:" + "11" * 32, "sha256:" + "22" * 32]}
    assert found["before"]["failure_rate"] < 0.005 < 0.01 < found["after"]["failure_rate"]
    (version,) = changes["versions"]
    assert (version["from_version"], version["to_version"]) == ("0.27.1", "0.28.0")
    table = run_cli("history", str(db), "--group-by", "host").stdout
    assert "change points in the failure rate" in table and "image_digest" in table
    # One rate throughout: no change point, in 200 noisy histories of 20 rounds.
    noise = sum(bool(segments([(int(rng.binomial(512, 0.01)), 512) for _ in range(20)]))
                for _ in range(200))
    assert noise <= 2


# -- PostgreSQL: several writers, an outage ----------------------------------------------


@pytest.mark.slow  # four real soak processes: ~50 s on two cores
def test_several_soak_processes_write_to_one_database_at_once(fake_server, tmp_path: Path,
                                                              postgres_cluster) -> None:
    """Real processes, one database, nothing lost: every round of every soak, with its
    verdict counts."""
    url = postgres_cluster.new_database("fleet_writers")
    _, srv = fake_server(("ok", "stuck", "ok", "ok"))
    sc = str(scenario(tmp_path))
    writers, rounds = 4, 3
    procs = [subprocess.Popen(
        cli_command("soak", sc, "--base-url", srv.url, "--rounds", str(rounds), "--out",
                    str(tmp_path / f"node-{i}"), "--history", url, "--quiet"),
        env=cli_env({"DSV4_QUAL_HOST": f"node-{i}"}), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for i in range(writers)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode in (0, 1), out + err
        assert "WARNING" not in err, err
    soaks = query(url, "SELECT * FROM soaks")
    assert len(soaks) == writers and {s["status"] for s in soaks} == {"finished"}
    rows = query(url, "SELECT * FROM rounds WHERE status = 'complete'")
    assert len(rows) == writers * rounds
    assert {r["host"] for r in rows} == {f"node-{i}" for i in range(writers)}
    counted = query(url, "SELECT soak_id, round, sum(count) AS n FROM round_verdicts "
                    "WHERE phase = 'measurement' GROUP BY soak_id, round")
    assert len(counted) == writers * rounds and all(c["n"] >= 4 for c in counted)
    for node in range(writers):  # each node's spool says the same as the database
        spool = tmp_path / f"node-{node}" / "history-spool.sqlite"
        local = query(str(spool), "SELECT soak_id, round, measured, gated_failures FROM rounds")
        assert local and all(
            {k: r[k] for k in local[0]} in local for r in rows if r["host"] == f"node-{node}")
        assert not query(str(spool), "SELECT * FROM spool_pending")


@pytest.fixture
def own_cluster() -> Iterator[object]:
    """A cluster of its own, to stop and start under a soak."""
    from tests.support.postgres import Cluster

    cluster = Cluster().start()
    try:
        yield cluster
    finally:
        cluster.remove()


def _when_served(fake: object, steps: list[tuple[int, Callable[[], None]]]) -> threading.Thread:
    """Run each step once the fake server has been sent that many chats (in order)."""
    def watch() -> None:
        for count, step in steps:
            deadline = time.monotonic() + 120
            while sum(fake.counts.values()) < count and time.monotonic() < deadline:
                time.sleep(0.01)
            step()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow  # stops and starts a PostgreSQL server of its own
def test_a_database_that_goes_away_mid_soak_loses_no_round(fake_server, tmp_path: Path,
                                                           own_cluster) -> None:
    url = own_cluster.new_database("outage")
    fake, srv = fake_server(("ok",), token_delay_s=0.01)
    # Down in round 1 (requests 1-6), back once round 4 (requests 15-18) has begun.
    watcher = _when_served(fake, [(3, own_cluster.stop), (16, own_cluster.start)])
    proc = run_cli("soak", str(scenario(tmp_path)), "--base-url", srv.url, "--rounds", "4",
                   "--out", str(tmp_path / "o"), "--history", url, "--quiet")
    watcher.join(timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot be written" in proc.stderr and "is back" in proc.stderr
    rows = query(url, "SELECT round, status, measured FROM rounds ORDER BY round")
    assert rows == [{"round": n, "status": "complete", "measured": 4} for n in (1, 2, 3, 4)]
    assert query(url, "SELECT status FROM soaks") == [{"status": "finished"}]
    assert len(query(url, "SELECT DISTINCT round FROM round_verdicts")) == 4


@pytest.mark.slow  # stops and starts a PostgreSQL server of its own
def test_a_database_still_away_at_the_end_is_said_loudly_and_written_by_the_next_soak(
        fake_server, tmp_path: Path, own_cluster) -> None:
    url = own_cluster.new_database("away")
    fake, srv = fake_server(("ok",), token_delay_s=0.01)
    watcher = _when_served(fake, [(3, own_cluster.stop)])
    args = ["soak", str(scenario(tmp_path)), "--base-url", srv.url, "--rounds", "2",
            "--out", str(tmp_path / "o"), "--history", url, "--quiet"]
    proc = run_cli(*args)
    watcher.join(timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the gate's code, as ever
    assert "2 round(s) of soak" in proc.stderr and "are NOT in it" in proc.stderr
    spool = str(tmp_path / "o" / "history-spool.sqlite")
    assert len(query(spool, "SELECT * FROM rounds WHERE status = 'complete'")) == 2
    own_cluster.start()
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = query(url, "SELECT soak_id, round, status FROM rounds ORDER BY started")
    assert [(r["round"], r["status"]) for r in rows] == [
        (1, "complete"), (2, "complete"), (1, "complete"), (2, "complete")]
    assert len({r["soak_id"] for r in rows}) == 2
    assert not query(spool, "SELECT * FROM spool_pending")


@pytest.mark.slow  # stops and starts a PostgreSQL server of its own
def test_a_database_unreachable_at_the_start_is_bad_input(fake_server, tmp_path: Path,
                                                          own_cluster) -> None:
    url = own_cluster.new_database("gone").replace("postgres@", "postgres:secret@")
    own_cluster.stop()
    fake, srv = fake_server(("ok",))
    proc = run_cli("soak", str(scenario(tmp_path)), "--base-url", srv.url, "--rounds", "1",
                   "--out", str(tmp_path / "o"), "--history", url, "--quiet")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "cannot connect" in proc.stderr and "secret" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sum(fake.counts.values()) == 0
    proc = run_cli("history", url)
    assert proc.returncode == 3 and "cannot connect" in proc.stderr


def _plotted(soak: str, number: int, layout: str, failures: int) -> RoundRow:
    return RoundRow(soak_id=soak, round=number, status="complete", started=float(number),
                    vllm_version="0.27.1", c128a_layout=layout, measured=64,
                    gated_failures=failures, upper_bound_95=0.1,
                    exit_code=1 if failures else 0)


def test_the_plot_never_repeats_a_round_number_across_soaks() -> None:
    rows = [_plotted("soak-a", n, "capacity", 0) for n in (1, 2, 3)] + \
        [_plotted("soak-b", n, "capacity", 0) for n in (1, 2)]
    ax = trend_figure(rows).axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["1.1", "1.2", "1.3", "2.1", "2.2"]
    assert "soak.round" in ax.get_xlabel() and "2 soaks" in ax.get_xlabel()
    one = trend_figure(rows[:3]).axes[0]
    assert [t.get_text() for t in one.get_xticklabels()] == ["1", "2", "3"]
    assert one.get_xlabel() == "round (oldest first)"


def test_the_plot_pools_by_the_group_asked_for() -> None:
    """--group-by layout: one bar a layout, titled so; the default stays per version."""
    rows = [_plotted("soak-a", 1, "packed", 20), _plotted("soak-a", 2, "capacity", 0),
            _plotted("soak-a", 3, "packed", 18)]
    bars = trend_figure(rows, keys=["layout"]).axes[1]
    assert bars.get_title() == "per C128A layout (valid rounds pooled)"
    assert [t.get_text() for t in bars.get_xticklabels()] == ["packed", "capacity"]
    heights = [round(p.get_height(), 2) for p in bars.patches]
    assert heights == [round(100 * 38 / 128, 2), 0.0]
    default = trend_figure(rows).axes[1]
    assert default.get_title() == "per vLLM version (valid rounds pooled)"
    assert [t.get_text() for t in default.get_xticklabels()] == ["0.27.1"]
    both = trend_figure(rows, keys=["vllm", "layout"]).axes[1]
    assert both.get_title() == "per vLLM version, C128A layout (valid rounds pooled)"
    assert [t.get_text() for t in both.get_xticklabels()] == ["0.27.1 / packed",
                                                              "0.27.1 / capacity"]
