"""A filter that names nothing the history holds is a typo, said as one (exit 3, the
closest known name and those there are), never empty tables or "no node reported"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.loadgen.commands.test_soak import scenario
from tests.loadgen.conftest import run_cli
from tests.support.openai_fake import FakeOpenAI, ServerThread


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A history of one soak round, recorded once for the module (its tests only read
    it, each from a copy of its own)."""
    folder = tmp_path_factory.mktemp("soaked")
    db = folder / "h.sqlite"
    srv = ServerThread(FakeOpenAI(("ok",)).app).start()
    try:
        proc = run_cli("soak", str(scenario(folder)), "--base-url", srv.url, "--rounds", "1",
                       "--out", str(folder / "soak"), "--history", str(db), "--quiet",
                       env={"DSV4_QUAL_HOST": "gb300-node-07"})
    finally:
        srv.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return db


@pytest.fixture
def history(soaked: Path, tmp_path: Path) -> str:
    """The soaked history, copied for this test alone (the database and any file beside
    it that it keeps)."""
    for path in soaked.parent.glob(soaked.name + "*"):
        shutil.copy2(path, tmp_path / path.name)
    return str(tmp_path / soaked.name)


def run(command: str, db: str, *args: str):
    extra = ["--no-plot"] if command == "history" else ["--since", "12h"]
    return run_cli(command, db, *args, *extra)


@pytest.mark.parametrize("command", ["history", "fleet"])
@pytest.mark.parametrize("flag,value,close", [
    ("--scenario", "soka", "soak"), ("--scenario", "sim-smok", "sim-smoke"),
    ("--host", "gb300-node-7", "gb300-node-07")])
def test_a_filter_one_letter_off_is_a_typo_with_the_known_names(
        history: str, command: str, flag: str, value: str, close: str) -> None:
    proc = run(command, history, flag, value)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1
    assert f"{flag} {value!r}: no round of this history has it (did you mean {close!r}?)" \
        in line
    assert ("it has soak" in line) if flag == "--scenario" else ("it has gb300-node-07" in line)


@pytest.mark.parametrize("flag,value", [("--host", "b200-rack9"),
                                        ("--scenario", "release-gate")])
def test_a_value_nobody_has_run_yet_is_no_typo(history: str, flag: str, value: str) -> None:
    # A node or a shipped scenario nobody has reported: the history says it has none of
    # it (naming what it has); the fleet says nobody reported (exit 2), as it should.
    shown = run("history", history, flag, value)
    assert shown.returncode == 0
    assert f"{flag} {value!r}: no round of this history has it" in shown.stderr
    assert "did you mean" not in shown.stderr
    assert run("fleet", history, flag, value).returncode == 2


@pytest.mark.parametrize("command", ["history", "fleet"])
def test_a_filter_naming_what_is_there_still_answers(history: str, command: str) -> None:
    proc = run(command, history, "--scenario", "soak")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no round of this history" not in proc.stderr
