"""Results and histories on a read-only share: read them, never end in a traceback.

A release manager reads last night's soak from an archive mount: `history` prints it
and says where the plot could not go, `report` rebuilds into a copy, and a soak's folder
handed to `report` names its rounds and the history command.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from loadgen.history import History, Soak
from tests.loadgen.conftest import run_cli
from tests.loadgen.commands.test_cli_run import scenario as run_scenario
from tests.loadgen.commands.test_soak import scenario as soak_scenario
from tests.loadgen.commands.test_soak import soak_dir
from tests.support.read_only import read_only


def _history(path: Path, rounds: int = 3) -> Path:
    store = History(path)
    store.add_soak(Soak("s1", "nightly-soak", str(path.parent), 1.0, "finished", None,
                        rounds, False), "test")
    for n in range(1, rounds + 1):
        store.start_round("s1", n, started=100.0 * n, scenario="nightly-soak",
                          results_dir=str(path.parent / f"round-{n:04d}"), priming=4,
                          restart_detected=False, server_starts={})
        store.finish_round("s1", n, status="complete", note=None, ended=100.0 * n + 50,
                           results={"measured": 32, "gated_failures": n - 1,
                                    "exit_code": int(n > 1)},
                           verdicts={"measurement": {"ok": 33 - n}})
    store.close()
    return path


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def shared_history(tmp_path: Path) -> Path:
    return _history(tmp_path / "share" / "soak-history.sqlite")


def test_history_json_reads_a_read_only_share_and_writes_nothing(shared_history: Path
                                                                  ) -> None:
    before = _digests(shared_history.parent)
    with read_only(shared_history.parent):
        proc = run_cli("history", str(shared_history), "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["round"] for r in json.loads(proc.stdout)["rounds"]] == [1, 2, 3]
    assert proc.stderr == ""  # no plot asked for, none written, nothing to warn about
    assert _digests(shared_history.parent) == before


def test_history_tables_on_a_read_only_share_warn_that_the_plot_was_not_written(
        shared_history: Path) -> None:
    with read_only(shared_history.parent):
        proc = run_cli("history", str(shared_history))
    assert proc.returncode == 0, proc.stderr
    assert "rounds" in proc.stdout  # the tables were printed whole
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"dsv4-qual: warning: trend plot {shared_history.parent}")
    assert line.endswith("; --plot PATH to write it elsewhere, or --no-plot")
    assert not list(shared_history.parent.glob("*.png"))


def test_no_plot_writes_no_plot_and_says_nothing(shared_history: Path) -> None:
    with read_only(shared_history.parent):
        proc = run_cli("history", str(shared_history), "--no-plot")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "rounds" in proc.stdout


def test_a_plot_named_where_it_cannot_go_is_bad_input(shared_history: Path,
                                                     tmp_path: Path) -> None:
    target = shared_history.parent / "trend.png"
    with read_only(shared_history.parent):
        proc = run_cli("history", str(shared_history), "--plot", str(target))
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [
        f"dsv4-qual: error: trend plot {target}: cannot write it "
        f"({proc.stderr.split('(')[1].split(')')[0]}); --plot PATH to write it elsewhere, "
        "or --no-plot"]
    elsewhere = tmp_path / "mine" / "trend.png"
    with read_only(shared_history.parent):
        proc = run_cli("history", str(shared_history), "--json", "--plot", str(elsewhere))
    assert proc.returncode == 0 and elsewhere.read_bytes()[:4] == b"\x89PNG"


def test_plot_and_no_plot_together_are_bad_input(shared_history: Path) -> None:
    proc = run_cli("history", str(shared_history), "--plot", "x.png", "--no-plot")
    assert proc.returncode == 3
    assert proc.stderr.strip() == "dsv4-qual: error: --plot and --no-plot: choose one"


@pytest.fixture
def finished_run(fake_server, tmp_path: Path) -> Path:
    _, srv = fake_server(("ok", "stuck"))
    out = tmp_path / "archive" / "run"
    proc = run_cli("run", str(run_scenario(tmp_path)), "--base-url", srv.url, "--out",
                   str(out), "--quiet")
    assert proc.returncode == 1, proc.stderr
    return out


def test_report_in_place_on_a_read_only_run_names_out(finished_run: Path) -> None:
    before = _digests(finished_run)
    with read_only(finished_run):
        proc = run_cli("report", str(finished_run))
    assert proc.returncode == 3
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"dsv4-qual: error: {finished_run}: cannot write its reports")
    assert line.endswith(f"`dsv4-qual report {finished_run} --out NEW` rebuilds them in a copy")
    assert _digests(finished_run) == before  # nothing of the run lost or half-written


def test_report_out_rebuilds_a_copy_and_leaves_the_run_as_it_was(finished_run: Path,
                                                                 tmp_path: Path) -> None:
    before = _digests(finished_run)
    copy = tmp_path / "copy"
    with read_only(finished_run):
        proc = run_cli("report", str(finished_run), "--out", str(copy))
    assert proc.returncode == 1, proc.stderr  # the run's own exit code: its gate failed
    assert str(copy) in proc.stdout
    assert _digests(finished_run) == before
    rebuilt = json.loads((copy / "summary.json").read_text())
    assert rebuilt["gate"] == json.loads((finished_run / "summary.json").read_text())["gate"]
    # The copy is the user's to write again, whatever the archive's modes were.
    assert run_cli("report", str(copy)).returncode == 1


@pytest.mark.parametrize("where", ["inside", "non-empty", "a file"])
def test_report_out_that_cannot_hold_the_copy_is_bad_input(finished_run: Path,
                                                           tmp_path: Path, where: str) -> None:
    target = {"inside": finished_run / "again", "non-empty": tmp_path / "full",
              "a file": tmp_path / "f.txt"}[where]
    if where == "non-empty":
        target.mkdir()
        (target / "keep.txt").write_text("mine")
    if where == "a file":
        target.write_text("mine")
    proc = run_cli("report", str(finished_run), "--out", str(target))
    assert proc.returncode == 3 and len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"dsv4-qual: error: --out {target}: ")
    assert not (finished_run / "again").exists()


def test_report_on_a_soak_names_its_rounds_and_the_history(fake_server,
                                                           tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    out = tmp_path / "soak"
    db = tmp_path / "h.sqlite"
    proc = run_cli("soak", str(soak_scenario(tmp_path)), "--base-url", srv.url, "--rounds",
                   "2", "--out", str(out), "--history", str(db), "--quiet")
    assert proc.returncode == 0, proc.stderr
    folder = soak_dir(out)
    for given, where in ((folder, "a soak's folder"),
                         (out, f"a soak's --out folder (1 soak(s); the last: {folder.name})")):
        proc = run_cli("report", str(given))
        assert proc.returncode == 3
        assert proc.stderr.splitlines() == [
            f"dsv4-qual: error: {given}: {where}, not one run: its rounds are each a results "
            f"directory (round-0001 to round-0002: 2): `dsv4-qual report "
            f"{folder / 'round-0002'}`; the soak's trend: `dsv4-qual history {db}`"]
