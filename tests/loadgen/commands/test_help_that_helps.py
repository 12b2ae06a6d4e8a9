"""Help that helps a new user: bare command, unknown scenario names and keys, narrow tables."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from loadgen.history.rows import RoundRow
from loadgen.report.trend import round_table
from tests.loadgen.conftest import run_cli


def test_bare_command_prints_its_help_and_succeeds() -> None:
    proc = run_cli()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: dsv4-qual")
    assert "demo" in proc.stdout and "run" in proc.stdout and proc.stderr == ""


def test_a_missing_usage_argument_is_still_bad_input() -> None:
    proc = run_cli("run")
    assert proc.returncode == 3 and "Missing argument" in proc.stderr


@pytest.mark.parametrize("name,close", [("nope", None), ("smok", "smoke"),
                                        ("release_gate", "release-gate")])
def test_an_unknown_scenario_name_lists_the_shipped_ones(name: str, close: str | None) -> None:
    proc = run_cli("run", name, "--base-url", "http://127.0.0.1:1")
    assert proc.returncode == 3
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "shipped scenarios: issue-52448, nightly-soak, positive-control, pr-51318, " \
           "release-gate, sim-known-answer, sim-sessions, sim-smoke, smoke" in line
    assert (f"(did you mean {close!r}?)" in line) if close else "did you mean" not in line


def test_a_path_that_does_not_exist_is_not_offered_the_shipped_names(tmp_path: Path) -> None:
    proc = run_cli("validate", str(tmp_path / "mine.toml"))
    assert proc.returncode == 3 and "shipped scenarios" not in proc.stderr


def _misspellings(name: str) -> list[str]:
    """What a user types for a shipped name: another case, `_` for `-`, a file name."""
    typed = [name.upper(), name.title(), name.replace("-", "_"), f"{name}.toml",
             f"scenarios/{name}.toml", f"{name.upper()}.toml"]
    return [t for t in typed if t != name]


@pytest.mark.parametrize("name", ["smoke", "release-gate", "nightly-soak", "issue-52448",
                                  "sim-smoke", "pr-51318", "positive-control"])
def test_a_shipped_name_written_another_way_is_suggested(tmp_path: Path, name: str) -> None:
    # From an empty folder, so `scenarios/NAME.toml` is a path that does not exist here.
    for typed in _misspellings(name):
        proc = run_cli("validate", typed, cwd=tmp_path)
        assert proc.returncode == 3, typed
        line = proc.stderr.strip()
        assert len(line.splitlines()) == 1
        assert line.startswith(f"dsv4-qual: error: {typed}: no such scenario file (did you "
                               f"mean {'the shipped scenario ' if '.' in typed else ''}"
                               f"{name!r}?)"), line
        assert ("shipped scenarios:" in line) == ("." not in typed and "/" not in typed)


def test_a_file_name_like_no_shipped_one_gets_no_guess(tmp_path: Path) -> None:
    proc = run_cli("validate", "mine.toml", cwd=tmp_path)
    assert proc.stderr.strip() == "dsv4-qual: error: mine.toml: no such scenario file"


@pytest.mark.parametrize("text,where,suggested", [
    ("[lod]\nconcurrency = 4\n", "lod", "load"),
    ("[load]\nconcurency = 4\n", "load.concurency", "concurrency"),
    ("[workload]\nkind = \"long-context\"\ncontext_tokns = 4\n", "workload.context_tokns",
     "context_tokens"),
    ("[workload]\nkind = \"tool-turn\"\nvarient = \"per-request\"\n", "workload.varient",
     "variant"),
    ("[qualify.control.sim]\nlayot = \"packed\"\n", "qualify.control.sim.layot", "layout"),
    ("[gate]\nfail_onn = []\n", "gate.fail_onn", "fail_on"),
    ("[target.sim]\nmax_num_seq = 8\n", "target.sim.max_num_seq", "max_num_seqs"),
])
def test_an_unknown_scenario_key_gets_a_did_you_mean(tmp_path: Path, text: str, where: str,
                                                    suggested: str) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text(text)
    proc = run_cli("validate", str(sc))
    assert proc.returncode == 3
    assert proc.stderr.strip() == (f"dsv4-qual: error: {sc}: {where}: unknown key "
                                   f"(did you mean {suggested!r}?)")


def test_a_key_like_nothing_gets_no_guess(tmp_path: Path) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text("[load]\nxyzzy = 1\n")
    proc = run_cli("validate", str(sc))
    assert proc.stderr.strip().endswith("load.xyzzy: unknown key")


def _round(soak: str, number: int, **extra: object) -> dict:
    return {"soak_id": soak, "round": number, "started": 1_796_000_000.0 + number,
            "status": "complete", "vllm_version": "0.27.1+cu130", "c128a_layout": "capacity",
            "priming": 64, "measured": 512, "gated_failures": 3, "upper_bound_95": 0.0152,
            "ttft_p50": 0.41, "e2e_p99": 12.5, "exit_code": 1, **extra}


def _render(table: object, width: int) -> list[str]:
    out = Console(file=io.StringIO(), width=width, record=True)
    out.print(table)
    return out.export_text().splitlines()


@pytest.mark.parametrize("soaks", [1, 2])
def test_the_history_table_fits_an_80_column_terminal(soaks: int) -> None:
    ids = [f"nightly-soak-20261129T101500Z-0123{i}-1" for i in range(soaks)]
    rows = [_round(ids[i % soaks], i + 1) for i in range(4)]
    lines = _render(round_table([RoundRow.from_row(r) for r in rows], 80), 80)
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "…" not in text  # nothing cut short
    # What a release manager reads off each round is all there, on one line a round.
    rounds = [line.split() for line in lines if line.split()[:1] in (["1"], ["2"])]
    assert len(rounds) == 2 and all(
        {"complete", "0.27.1+cu130", "capacity", "3/512", "1.52%"} <= set(words)
        for words in rounds), lines
    assert "a wider terminal or --json" in " ".join(text.split())  # where the rest went
    for soak in ids:
        assert f"soak {soak}: rounds" in text  # each soak's id once, above its rounds


def test_a_wide_terminal_gets_every_column() -> None:
    rows = [_round("s-1", 1), _round("s-2", 2)]
    text = "\n".join(_render(round_table([RoundRow.from_row(r) for r in rows], 200), 200))
    for header in ("soak", "primed", "rate", "TTFT p50", "e2e p99", "exit"):
        assert header in text
    assert "a wider terminal" not in text


def test_the_readme_says_who_it_is_for_and_what_it_answers_before_the_mechanism() -> None:
    from tests.loadgen.conftest import REPO

    text = (REPO / "README.md").read_text()
    first = " ".join(text.split("\n\n")[1].split())  # the paragraph under the title
    assert "release managers" in first and "operators" in first
    assert "?" in first  # the question it answers, asked as one
    assert "exits 0 only when" in first
    for jargon in ("C128A", "CUDA graph", "DSpark", "stride", "packed"):
        assert jargon not in first, jargon
    assert "C128A" in text.split("\n\n")[2]  # then the mechanism
