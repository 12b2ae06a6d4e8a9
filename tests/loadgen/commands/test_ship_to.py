"""`--ship-to DEST`: finished reports copied to DEST/<node>/..., the local ones kept."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest

from loadgen.exit_codes import ExitCode
from tests.loadgen.conftest import run_cli
from tests.support.scenario_files import write_scenario

SC = {"request": {"max_tokens": 32}, "workload": {"accounts": 64}, "gate": {"min_measured": 1}}


@pytest.fixture
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DSV4_QUAL_HOST", "gb300-n05")
    return write_scenario(tmp_path / "ship.toml", SC)


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_run_ships_its_whole_results_directory_under_its_node(
        fake_server, scenario: Path, tmp_path: Path) -> None:
    _, srv = fake_server(["ok"] * 8)
    out, dest = tmp_path / "local" / "run-1", tmp_path / "shared"
    done = run_cli("run", str(scenario), "--base-url", srv.url, "--out", str(out),
                   "--quiet", "--ship-to", str(dest))
    assert done.returncode == ExitCode.PASSED, done.stderr
    shipped = dest / "gb300-n05" / "run-1"
    assert f"reports shipped to {shipped}" in done.stderr
    assert files(shipped) == files(out) >= {"summary.json", "records.jsonl", "report.md",
                                            "junit.xml"}
    assert (shipped / "summary.json").read_bytes() == (out / "summary.json").read_bytes()


def test_a_soak_ships_each_round_as_it_finishes(fake_server, scenario: Path,
                                                tmp_path: Path) -> None:
    _, srv = fake_server(["ok"] * 16)
    out, dest = tmp_path / "soak", tmp_path / "shared"
    done = run_cli("soak", str(scenario), "--base-url", srv.url, "--rounds", "2", "--out",
                   str(out), "--quiet", "--ship-to", str(dest))
    assert done.returncode == ExitCode.PASSED, done.stderr
    (soak_dir,) = [p for p in out.iterdir() if p.is_dir()]
    for number in (1, 2):
        local = soak_dir / f"round-{number:04d}"
        shipped = dest / "gb300-n05" / soak_dir.name / local.name
        assert files(shipped) == files(local)
    assert done.stderr.count("reports shipped to") == 2


def test_a_qualification_ships_both_sides_and_its_verdict(fake_server, scenario: Path,
                                                          tmp_path: Path) -> None:
    _, control = fake_server(["stuck"] * 8)
    _, candidate = fake_server(["ok"] * 8)
    out, dest = tmp_path / "q-1", "memory://dsv4-reports/nightly"
    done = run_cli("qualify", str(scenario), "--control", control.url, "--candidate",
                   candidate.url, "--out", str(out), "--quiet", "--ship-to", dest)
    assert done.returncode == ExitCode.PASSED, done.stderr
    fs = fsspec.filesystem("memory")
    shipped = {p.split("/q-1/", 1)[1] for p in fs.find("/dsv4-reports/nightly/gb300-n05/q-1")}
    assert shipped == files(out)
    assert {"qualify.json", "control/summary.json", "candidate/summary.json"} <= shipped


def test_a_destination_that_cannot_work_is_bad_input_before_anything_is_sent(
        fake_server, scenario: Path, tmp_path: Path) -> None:
    fake, srv = fake_server(["ok"] * 8)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for dest, words in ((str(blocker / "shared"), "cannot write there"),
                        ("nosuchstore://bucket/x", "--ship-to nosuchstore://bucket/x")):
        done = run_cli("run", str(scenario), "--base-url", srv.url, "--out",
                       str(tmp_path / "never"), "--quiet", "--ship-to", dest)
        assert done.returncode == ExitCode.BAD_INPUT, done.stderr
        assert words in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "never").exists()
    assert fake.max_in_flight == 0  # not one request was sent


def test_a_copy_that_fails_warns_and_keeps_the_exit_code_and_the_local_results(
        fake_server, scenario: Path, tmp_path: Path) -> None:
    _, srv = fake_server(["ok", "stuck"] * 4)
    dest = tmp_path / "shared"
    (dest / "gb300-n05").mkdir(parents=True)
    (dest / "gb300-n05" / "run-2").write_text("a file where the copy would go")
    out = tmp_path / "run-2"
    done = run_cli("run", str(scenario), "--base-url", srv.url, "--out", str(out),
                   "--quiet", "--ship-to", str(dest))
    assert done.returncode == ExitCode.GATE_FAILED  # the run's own code, not the copy's
    assert "warning: reports not shipped to" in done.stderr
    assert f"they are in {out}" in done.stderr
    assert (out / "summary.json").is_file()
