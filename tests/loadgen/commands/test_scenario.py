"""Scenario validation: every mistake is one line naming file, key and problem; exit 3."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.exit_codes import BadInputError
from loadgen.scenario import load_scenario
from tests.loadgen.conftest import REPO, run_cli

SMOKE = str(REPO / "scenarios" / "smoke.toml")



def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,key,problem", [
    ("[load]\nconcurrency = -4\n", "load.concurrency", "greater than or equal to 1"),
    ("[load]\nconcurency = 4\n", "load.concurency", "unknown key"),
    ("[load]\nconcurrency = 'many'\n", "load.concurrency", "valid integer"),
    ("[load]\nmeasurement = 1000000000000\n", "load.measurement", "less than or equal"),
    ("[load]\npriming = -1\n", "load.priming", "greater than or equal to 0"),
    ("[request]\ntemperature = 9\n", "request.temperature", "less than or equal to 2"),
    ("[target]\nbase_urls = ['localhost:8000']\n", "target.base_urls", "not an http"),
    ("[target]\napi_key_env = 'sk-live-abc'\n", "target.api_key_env", "match pattern"),
    ("[workload]\nkind = 'nope'\n", "workload", "does not match any of the expected tags"),
    ("[workload]\nkind = 'tool-turn'\nlengths = [1]\n", "workload.lengths", "unknown key"),
    ("[workload]\nkind = 'long-context'\ncontext_tokens = [100]\nweights = [1, 2]\n",
     "workload", "one entry per context_tokens"),
    ("[gate]\nrole = 'both'\n", "gate.role", "'control' or 'candidate'"),
    ("[gate]\nfail_on = ['ok']\n", "gate.fail_on", "'ok' cannot fail"),
    ("[gate]\nfail_on = ['stuk_in_reasoning']\n", "gate.fail_on.0", "Input should be"),
    ("bogus = 1\n", "bogus", "unknown key"),
    ("[qualify]\ncontrol_fail_on = ['ok']\n", "qualify.control_fail_on", "'ok' cannot"),
    ("[qualify.control]\nbase_urls = ['gpu-a:8000']\n", "qualify.control.base_urls",
     "not an http"),
    ("[qualify.candidate]\nreceipt_dir = '/r'\n", "qualify.candidate.receipt_dir",
     "unknown key"),
    ("[qualify.control.sim]\nlayout = 'off'\n", "qualify.control.sim.layout", "Input should be"),
    ("[soak]\nduration = '8hr'\n", "soak.duration", "is not a duration"),
    ("[soak]\nrounds = 0\n", "soak.rounds", "greater than or equal to 1"),
    ("[telemetry]\nscrape_interval_s = -1\n", "telemetry.scrape_interval_s",
     "greater than or equal to 0"),
])
def test_bad_values_name_key_and_problem(tmp_path: Path, text: str, key: str, problem: str):
    path = write(tmp_path, text)
    with pytest.raises(BadInputError) as err:
        load_scenario(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {key}:"), message
    assert problem in message, message


@pytest.mark.parametrize("lower,upper,at_edge,problem", [
    ("loop_min_period_chars", "loop_max_period_chars", True, "must not exceed"),
    ("garbled_glued_run_letters", "garbled_glued_letters", True, "must not exceed"),
    ("garbled_shuffle_min_distinct", "garbled_shuffle_max_distinct", True, "must not exceed"),
    ("garbled_shuffle_max_distinct", "garbled_shuffle_window_words", False, "must be below"),
])
def test_thresholds_that_bound_each_other_are_held_in_order(
        tmp_path: Path, lower: str, upper: str, at_edge: bool, problem: str) -> None:
    """A lower bound above its upper one would switch a rule off without a word: refused,
    in one line naming both keys; equal passes where the rule allows it."""
    from loadgen.scenario import VerdictConfig

    high = VerdictConfig.model_fields[upper].default
    equal = write(tmp_path, f"[verdicts]\n{lower} = {high}\n", "equal.toml")
    above = write(tmp_path, f"[verdicts]\n{lower} = {high + 1}\n", "above.toml")
    for path, refused in ((equal, not at_edge), (above, True)):
        if not refused:
            assert getattr(load_scenario(path).verdicts, lower) == high
            continue
        with pytest.raises(BadInputError) as err:
            load_scenario(path)
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"{path}: verdicts:"), message
        assert f"{lower} {problem} {upper}" in message, message


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such scenario file"):
        load_scenario(tmp_path / "absent.toml")
    with pytest.raises(BadInputError, match="invalid TOML"):
        load_scenario(write(tmp_path, "[load\nconcurrency=1"))
    with pytest.raises(BadInputError, match="is a directory"):
        load_scenario(tmp_path)


def test_replay_file_must_exist(tmp_path: Path) -> None:
    path = write(tmp_path, "[workload]\nkind = 'replay'\npath = 'bodies.jsonl'\n")
    with pytest.raises(BadInputError, match=r"workload\.path: no such file"):
        load_scenario(path)
    (tmp_path / "bodies.jsonl").write_text('{"messages": []}\n')
    sc = load_scenario(path)
    assert sc.workload.path == str((tmp_path / "bodies.jsonl").resolve())


def test_bare_name_resolves_to_shipped_scenarios() -> None:
    assert load_scenario("smoke").name == "smoke"


def test_overrides_are_validated() -> None:
    sc = load_scenario("smoke")
    assert sc.with_overrides(concurrency=30, base_urls=["http://h:1/"]).load.concurrency == 30
    assert sc.with_overrides(base_urls=["http://h:1/"]).target.base_urls == ["http://h:1"]
    with pytest.raises(BadInputError, match=r"command line: load\.concurrency"):
        sc.with_overrides(concurrency=0)


def test_every_shipped_scenario_validates() -> None:
    files = sorted((REPO / "scenarios").glob("*.toml"))
    assert files
    for f in files:
        proc = run_cli("validate", str(f))
        assert proc.returncode == 0, (f, proc.stderr)


@pytest.mark.parametrize("args", [
    ["validate", "does-not-exist.toml"],
    ["run", "does-not-exist.toml"],
    ["run", SMOKE, "--concurrency", "-1", "--base-url", "http://127.0.0.1:9"],
    ["run", SMOKE, "--concurrency", "abc"],
    ["run", SMOKE],  # no target at all
    ["run", SMOKE, "--base-url", "ftp://x"],
    ["nonsense-command"],
    ["run", "--no-such-flag", SMOKE],
])
def test_cli_bad_input_exits_3_with_one_line(args: list[str]) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip(), "a reason must be printed"


def test_validate_ok_prints_a_summary() -> None:
    proc = run_cli("validate", SMOKE)
    assert proc.returncode == 0
    assert "smoke: ok (tool-turn, concurrency 8" in proc.stdout


def test_an_unreadable_scenario_path_is_bad_input(tmp_path: Path, monkeypatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    scenario = locked / "s.toml"

    def denied(self: Path) -> bool:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "exists", denied)
    with pytest.raises(BadInputError, match="cannot read"):
        load_scenario(scenario)


def test_every_scenario_key_is_documented() -> None:
    from loadgen import scenario as s

    page = (REPO / "docs" / "scenario-keys.md").read_text()
    models = [s.Scenario, s.TargetConfig, s.SimTarget, s.LoadConfig, s.RequestConfig,
              s.ToolTurnWorkload, s.LongContextWorkload, s.ReplayWorkload, s.KnownAnswerWorkload,
              s.SessionWorkload, s.MixWorkload, s.GateConfig,
              s.VerdictConfig, s.TelemetryConfig, s.QualifyConfig, s.QualifySide,
              s.SoakConfig, s.ReferenceConfig]
    missing = sorted({f"{m.__name__}.{key}" for m in models for key in m.model_fields
                      if f"`{key}`" not in page})
    assert missing == []
