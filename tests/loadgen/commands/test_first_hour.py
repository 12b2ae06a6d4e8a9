"""What a new user sees in the first hour: each friction found trying the README, fixed."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import httpx
import pytest

from loadgen.exit_codes import RunInvalidError
from loadgen.targets.readiness import wait_ready
from tests.loadgen.conftest import REPO, run_cli
from tests.support.scenario_files import BARE, write_scenario

SMOKE = str(REPO / "scenarios" / "smoke.toml")


def test_waiting_for_the_server_says_what_it_waits_for_and_beats() -> None:
    said: list[str] = []

    async def wait() -> None:
        async with httpx.AsyncClient() as http:
            await wait_ready(http, "http://127.0.0.1:1", 0.6, interval_s=0.05,
                             say=said.append, heartbeat_s=0.2)

    with pytest.raises(RunInvalidError, match=r"not ready after 0\.6 s: nothing listening"):
        asyncio.run(wait())
    assert said[0] == ("waiting for http://127.0.0.1:1 to be ready (GET /health and "
                       "/v1/models), up to 0.6 s (--ready-timeout SECONDS changes it)")
    assert any(line.startswith("still waiting for http://127.0.0.1:1: ") for line in said)


def _waiting_lines(url: str, timeout_s: float, **kwargs: object) -> tuple[list[str], str]:
    """What wait_ready says while it waits for `url`, and why it gave up."""
    said: list[str] = []

    async def wait() -> None:
        async with httpx.AsyncClient() as http:
            await wait_ready(http, url, timeout_s, interval_s=0.05, say=said.append,
                             heartbeat_s=0.2, **kwargs)  # type: ignore[arg-type]

    with pytest.raises(RunInvalidError) as caught:
        asyncio.run(wait())
    return said, str(caught.value)


def test_the_waiting_lines_say_nothing_is_listening_and_how_to_change_the_wait() -> None:
    said, reason = _waiting_lines("http://127.0.0.1:1", 0.5)
    what = "nothing listening on 127.0.0.1:1 (connection refused)"
    # At once, before any heartbeat: which address refuses, and that a loading server does.
    assert said[1].startswith(f"http://127.0.0.1:1: {what}; waiting")
    beats = [line for line in said if line.startswith("still waiting")]
    assert beats and all(what in line and "--ready-timeout SECONDS" in line for line in beats)
    assert what in reason and "--ready-timeout SECONDS waits longer" in reason


def test_an_unresolvable_host_gives_up_after_a_short_grace() -> None:
    start = time.monotonic()
    said, reason = _waiting_lines("http://no-such-host.invalid:8000", 60, dns_grace_s=0.3)
    assert time.monotonic() - start < 15  # not the 60 s ready timeout
    assert "no such host no-such-host.invalid" in said[1] and "check the address" in said[1]
    assert reason.startswith("server http://no-such-host.invalid:8000 not ready: no such "
                             "host no-such-host.invalid")
    assert "did not resolve for 0.3 s" in reason


def test_a_server_that_answers_but_is_not_ready_is_told_apart(fake_server) -> None:
    fake, srv = fake_server(("ok",))
    fake.healthy = False
    said, reason = _waiting_lines(srv.url, 0.5)
    assert said[1] == (f"{srv.url}: up but not ready (GET /health answered 503); waiting: "
                       "the server is starting")
    assert "up but not ready (GET /health answered 503)" in reason


def test_ready_timeout_on_the_command_line(tmp_path: Path) -> None:
    start = time.monotonic()
    proc = run_cli("run", SMOKE, "--base-url", "http://127.0.0.1:1", "--ready-timeout", "1",
                   "--out", str(tmp_path / "o"))
    assert time.monotonic() - start < 30
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith("waiting for http://127.0.0.1:1 to be ready")
    assert "up to 1 s" in proc.stderr
    assert "not ready after 1 s" in proc.stdout
    assert "are needed to prove" not in proc.stdout  # only the reason the run stopped
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["run"]["invalid"].startswith("server http://127.0.0.1:1 not ready")


def test_a_run_that_never_became_ready_says_so_and_counts_nothing(tmp_path: Path) -> None:
    out = tmp_path / "o"
    proc = run_cli("run", SMOKE, "--base-url", "http://127.0.0.1:1", "--ready-timeout", "0.5",
                   "--out", str(out))
    assert proc.returncode == 2
    line = proc.stdout.strip().splitlines()[-1]
    assert "RUN INVALID (exit 2): not ready, nothing sent — server http://127.0.0.1:1 not " \
           "ready after 0.5 s: nothing listening on 127.0.0.1:1" in line
    assert "0/0" not in line and "rate <" not in line
    assert not (out / "records.jsonl").exists()  # no empty file that reads as "0 requests"
    assert "not ready, nothing sent" in (out / "report.md").read_text().split("\n\n")[1]
    assert "not ready, nothing sent." in (out / "report.html").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gate"]["no_rate"] == "not ready, nothing sent"
    assert summary["gate"]["upper_bound_95"] is None
    assert summary["gate"]["statement"].startswith("Not ready, nothing sent: this run proves")
    # The folder is still a run `report` rebuilds, with the same words.
    again = run_cli("report", str(out))
    assert again.returncode == 2 and "not ready, nothing sent" in again.stdout


@pytest.mark.parametrize("args,words", [
    (["--measurement", "0"], "load.measurement"),
    (["--ready-timeout", "0"], "target.ready_timeout_s"),
])
def test_nothing_is_sent_or_created_for_bad_input(tmp_path: Path, args, words) -> None:
    proc = run_cli("run", SMOKE, "--base-url", "http://127.0.0.1:1", *args)
    assert proc.returncode == 3 and words in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists()  # the cwd: no results folder appeared


def test_no_target_leaves_no_results_folder(tmp_path: Path) -> None:
    proc = run_cli("run", SMOKE)
    assert proc.returncode == 3 and "no target" in proc.stderr
    assert not (tmp_path / "results").exists()


def _signal_during(monkeypatch: pytest.MonkeyPatch, module: object, name: str,
                   times: int = 1) -> list[int]:
    """Send SIGINT to this process inside the first `times` calls of module.name."""
    import os
    import signal

    real = getattr(module, name)
    sent: list[int] = []

    def interrupted(*args: object, **kwargs: object) -> object:
        if len(sent) < times:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, interrupted)
    return sent


def test_ctrl_c_while_reports_are_written_leaves_them_whole(fake_server, tmp_path: Path,
                                                            monkeypatch) -> None:
    from loadgen.commands import run as run_module

    _, srv = fake_server(("ok",))
    sc = write_scenario(tmp_path / "s.toml", BARE, load={"concurrency": 4, "measurement": 8},
                        gate={"prove_below": 0.5})
    sent = _signal_during(monkeypatch, run_module, "rebuild_reports")
    out = tmp_path / "o"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    assert sent == [1]
    # The run had finished: its reports are all there, and the code printed is returned.
    assert {"summary.json", "report.md", "junit.xml", "report.html"} <= {
        p.name for p in out.iterdir()}
    assert proc.returncode == 0 and "PASSED (exit 0)" in proc.stdout
    assert "SIGINT came after the run had finished: its reports are complete" in proc.stderr


def test_ctrl_c_while_the_control_reports_stops_the_demo_with_one_code(
        tmp_path: Path, monkeypatch) -> None:
    from loadgen.commands import run as run_module

    _signal_during(monkeypatch, run_module, "rebuild_reports")
    proc = run_cli("demo", "--out", str(tmp_path / "d"), "--quiet")
    assert proc.returncode == 130
    assert "demo: exit 130" in proc.stdout
    doc = json.loads((tmp_path / "d" / "qualify.json").read_text())
    assert doc["exit_code"] == 130 and doc["candidate"] is None
    assert (tmp_path / "d" / "control" / "summary.json").exists()
    assert not (tmp_path / "d" / "candidate").exists()


def _busy_port() -> tuple[object, int]:
    import socket

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    return busy, busy.getsockname()[1]


@pytest.mark.parametrize("case", ["busy port", "cuda without a GPU", "no torch"])
def test_sim_errors_are_one_line_and_exit_3(case: str, monkeypatch) -> None:
    import sys

    busy, port = _busy_port()
    args = ["sim", "--port", str(port)]
    if case == "cuda without a GPU":
        pytest.importorskip("torch")
        import torch

        if torch.cuda.is_available():
            pytest.skip("this host has CUDA")
        args += ["--device", "cuda"]
    if case == "no torch":
        monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails
    try:
        proc = run_cli(*args)
    finally:
        busy.close()  # type: ignore[attr-defined]
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsv4-qual: error: "), proc.stderr
    assert "Usage" not in proc.stderr and "serving" not in proc.stderr
    words = {"busy port": "cannot listen on", "cuda without a GPU": "no CUDA device",
             "no torch": "needs the server extra"}[case]
    assert words in lines[0]
    if case == "no torch":  # the project is not on an index: the hint says how to get it
        assert "pip install -e '.[server]'" in lines[0] and "CPU wheel first" in lines[0]
        assert "pip install 'dsv4-qual[server]'" not in lines[0]


class _Records(logging.Handler):
    """Every log record of a run shared by a module's tests (caplog is one test's)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _logged_run(*args: str, level: int) -> tuple[object, list[logging.LogRecord]]:
    root = logging.getLogger()
    handler, before = _Records(), root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        return run_cli(*args), handler.records
    finally:
        root.removeHandler(handler)
        root.setLevel(before)


@pytest.fixture(scope="module")
def default_demo(tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[object, Path, list[logging.LogRecord]]:
    """The default demo, run once for the tests that read what it printed and wrote."""
    out = tmp_path_factory.mktemp("default-demo") / "d"
    proc, records = _logged_run("demo", "--out", str(out), level=logging.WARNING)
    return proc, out, records


def test_a_control_states_its_reproduction_rate_and_its_expected_guard_line(
        default_demo: tuple[object, Path, list[logging.LogRecord]]) -> None:
    proc, out, records = default_demo
    assert proc.returncode == 0  # type: ignore[attr-defined]
    control_line = next(line for line in proc.stdout.splitlines()  # type: ignore[attr-defined]
                        if "[control]" in line)
    assert "reproduced the bug, rate > " in control_line and "rate <" not in control_line
    header = (out / "control" / "report.md").read_text().split("\n\n")[1]
    assert "reproduced the bug" in header and "failed the gate" not in header
    assert "Reproduction rate &gt;" in (out / "control" / "report.html").read_text()
    # The guard's line on the packed control says this is the finding it expects.
    guard_lines = [r.getMessage() for r in records if "stride violation" in r.getMessage()]
    assert guard_lines and all("expected here: this sim runs the packed layout" in line
                               for line in guard_lines)


def test_a_short_runs_report_says_what_it_could_not_see(fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    # No scrape while the run sends: only the idle before/after samples. (An interval
    # longer than the run still scrapes once 0.5 s in, and a busy machine's run of eight
    # requests can last that long.)
    sc = write_scenario(tmp_path / "s.toml", BARE, load={"concurrency": 4, "measurement": 8},
                        gate={"prove_below": 0.5}, telemetry={"scrape_interval_s": 0})
    out = tmp_path / "o"
    assert run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out)).returncode == 0
    page = (out / "report.html").read_text()
    assert "too short to sample the server under load" in page
    assert 'id="telemetry"' not in page  # no table of "max running 0" from idle samples
    assert "No request failed: nothing to plot against the number in flight." in page
    assert '<table class="facts">' in page
    md = (out / "report.md").read_text()
    assert "too short to sample" in md and "| max running |" not in md


def test_documents_people_read_have_rounded_numbers(
        default_demo: tuple[object, Path, list[logging.LogRecord]]) -> None:
    proc, out, _ = default_demo
    assert proc.returncode == 0  # type: ignore[attr-defined]

    def floats(obj: object) -> list[float]:
        if isinstance(obj, float):
            return [obj]
        if isinstance(obj, dict):
            return [f for v in obj.values() for f in floats(v)]
        if isinstance(obj, list):
            return [f for v in obj for f in floats(v)]
        return []

    for path in (out / "qualify.json", out / "control" / "summary.json"):
        values = floats(json.loads(path.read_text()))
        # At most 12 significant digits: float noise such as 0.10300000000000864 is gone.
        assert values and all(float(f"{v:.12g}") == v for v in values), path


#: A sim scenario small enough for a few seconds' run.
TINY_SIM = {"target": {"sim": {"max_num_seqs": 8, "max_model_len": 2048}},
            "load": {"priming": 2},
            "workload": {"kind": "long-context", "context_tokens": [96, 256], "tools": True},
            "gate": {"prove_below": 0.5, "require_receipts": True}}


@pytest.mark.parametrize("command", ["run", "soak", "qualify", "demo"])
def test_runs_on_the_sim_leave_nothing_in_the_temp_dir(command: str, tmp_path: Path,
                                                       temp_dir: Path) -> None:
    sc = write_scenario(tmp_path / "tiny.toml", TINY_SIM)
    out = tmp_path / "o"
    args = {"run": ["run", str(sc)], "soak": ["soak", str(sc), "--rounds", "1"],
            "qualify": ["qualify", str(sc)], "demo": ["demo", "--scenario", str(sc)]}[command]
    proc = run_cli(*args, "--out", str(out), "--quiet")
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
    # The sim made its receipts folder in the temp dir, and removed it.
    assert list(temp_dir.iterdir()) == []
    if command == "run":  # what the run read from it is kept in its results
        assert proc.returncode == 0, proc.stdout
        server = json.loads((out / "server.json").read_text())
        [receipt] = server["receipts"]
        assert receipt["counted"] and receipt["guard"]["calls"] > 0


def test_a_receipts_folder_the_user_named_is_kept(tmp_path: Path, temp_dir: Path) -> None:
    sc = write_scenario(tmp_path / "tiny.toml", TINY_SIM)
    receipts = tmp_path / "receipts"
    proc = run_cli("run", str(sc), "--receipts-dir", str(receipts), "--out",
                   str(tmp_path / "o"), "--quiet")
    assert proc.returncode == 0, proc.stdout
    assert len(list(receipts.glob("*.json"))) == 1 and list(temp_dir.iterdir()) == []


#: What a run id looks like (`results.new_run_id`), and each command's default folder.
RUN_ID = r"\d{8}T\d{6}Z-\d{5}-\d+"
DEFAULT_FORMS = {"results/<scenario>-<id>", "results/qualify-<scenario>-<id>",
                 "results/demo-<id>", "results/soak-<scenario>"}


def test_the_demo_is_named_demo_in_its_folder_pages_and_report(tmp_path: Path) -> None:
    import re

    write_scenario(tmp_path / "tiny.toml", TINY_SIM)
    proc = run_cli("demo", "--scenario", "tiny.toml", "--quiet")
    assert proc.returncode in (0, 2), proc.stdout
    [out] = (tmp_path / "results").iterdir()
    assert re.fullmatch(f"demo-{RUN_ID}", out.name), out.name  # README's results/demo-<id>
    assert json.loads((out / "qualify.json").read_text())["command"] == "demo"

    def headed_demo() -> None:
        assert (out / "report.md").read_text().startswith("# dsv4-qual demo: tiny\n")
        page = (out / "report.html").read_text()
        assert "<h1>dsv4-qual demo: tiny</h1>" in page and "dsv4-qual qualify" not in page
        assert 'testsuite name="dsv4-qual.demo.tiny"' in (out / "junit.xml").read_text()

    headed_demo()
    rebuilt = run_cli("report", str(out))
    assert rebuilt.returncode == proc.returncode
    assert rebuilt.stdout.startswith("demo tiny: "), rebuilt.stdout
    headed_demo()


def test_readme_cli_doc_and_every_help_name_results_folders_as_the_code_does() -> None:
    import re

    from loadgen.cli import _load_command_plugins, cli
    from loadgen.results import default_out_dir

    made = {default_out_dir("", "smoke", "ID"), default_out_dir("qualify", "smoke", "ID"),
            default_out_dir("demo", "", "ID")}
    assert {str(p) for p in made} == {"results/smoke-ID", "results/qualify-smoke-ID",
                                      "results/demo-ID"}
    texts = {doc: (REPO / doc).read_text() for doc in ("README.md", "docs/cli.md")}
    _load_command_plugins()
    for name in sorted(cli.commands):
        texts[f"{name} --help"] = run_cli(name, "--help").stdout
    for where, text in texts.items():
        text = re.sub(r"\s+", " ", text)
        for form in re.findall(r"results/[\w.<>-]*<[\w.<>-]*", text):
            assert form.rstrip(".") in DEFAULT_FORMS, (where, form)
        for example in re.findall(r"results/[\w.-]*\d{8}T\d{6}Z[\w.-]*", text):
            assert re.fullmatch(rf"results/(demo|qualify-[\w.-]+|[\w.-]+)-{RUN_ID}", example), (
                where, example)


def test_the_progress_lines_are_told_what_the_run_level_rules_changed(
        fake_server, tmp_path: Path) -> None:
    # Identical greedy tool turns; every fourth reply answers at length: its own verdict is
    # ok as it completes, `divergent` once the run is judged as a whole.
    _, srv = fake_server(("ok", "ok", "ok", "big_chunk"))
    sc = write_scenario(tmp_path / "s.toml", BARE, load={"concurrency": 1, "measurement": 12},
                        workload={"kind": "tool-turn"}, gate={"prove_below": 0.9})
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stdout
    assert "measurement: 12/12 done, 0 in flight" in proc.stderr and " ok=12 (done)" in proc.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 9, "divergent": 3}
    # ... and the line after the progress says where the three went.
    assert ("measurement: run-level verdicts, judged once the run ended: divergent 3 (identical "
            "greedy bodies, different answers; 3 of them counted ok above)") in proc.stderr
    quiet = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "q"),
                    "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""


@pytest.fixture(scope="module")
def quiet_tiny_demo(tmp_path_factory: pytest.TempPathFactory
                    ) -> tuple[object, Path, list[logging.LogRecord]]:
    """A quiet demo of TINY_SIM, run once for the tests that read its table and lines."""
    folder = tmp_path_factory.mktemp("tiny-demo")
    sc = write_scenario(folder / "tiny.toml", TINY_SIM)
    out = folder / "d"
    proc, records = _logged_run("demo", "--scenario", str(sc), "--out", str(out), "--quiet",
                                level=logging.DEBUG)
    return proc, out, records


def test_the_demo_table_tells_what_a_control_counts_from_what_it_only_shows(
        quiet_tiny_demo: tuple[object, Path, list[logging.LogRecord]]) -> None:
    proc, _, _ = quiet_tiny_demo
    assert proc.returncode in (0, 2), proc.stdout  # type: ignore[attr-defined]
    text = " ".join(proc.stdout.split())  # type: ignore[attr-defined]
    rows = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines()  # type: ignore[attr-defined]
            if line.startswith("│") and line.split("│")[1].strip()}
    assert {"ok", "verdicts counted", "verdicts not counted", "gated failures"} <= set(rows)
    counted = rows["verdicts counted"].split("│")[2]
    assert "stuck_in_reasoning" in counted or counted.strip() == "-"
    assert not any(v in counted for v in ("cross_talk", "garbled", "no_tool_call", "divergent"))
    assert ("A control counts only what reproduces the bug (stuck_in_reasoning); its other "
            "verdicts are shown, not counted.") in text


def test_a_quiet_demo_prints_its_table_and_one_line(
        quiet_tiny_demo: tuple[object, Path, list[logging.LogRecord]]) -> None:
    from server_patch.sim.embedded import QUIET_LOGGER

    proc, out, records = quiet_tiny_demo
    stdout, stderr = proc.stdout, proc.stderr  # type: ignore[attr-defined]
    assert proc.returncode in (0, 2), stdout  # type: ignore[attr-defined]
    assert stderr == ""
    lines = stdout.rstrip("\n").splitlines()
    assert lines[-1].startswith("demo: exit ") and lines[-1].endswith(f"reports in {out}")
    assert not any(line.startswith("demo: exit") for line in lines[:-1])
    assert lines[0].strip() == "dsv4-qual demo: tiny on the embedded sim"
    for words in ("priming", "measurement:", "[control]", "[candidate]", "waiting for",
                  "stride violation", "run-level"):
        assert words not in stdout, words
    # The guard's line went to the quiet run's logger, which writes nothing (a handler on
    # the root logger hears only what propagates).
    quiet = logging.getLogger(QUIET_LOGGER)
    assert not quiet.propagate and any(isinstance(h, logging.NullHandler)
                                       for h in quiet.handlers)
    assert {r.name for r in records if "stride violation" in r.getMessage()} <= {
        QUIET_LOGGER}
    # What the guard saw is in the control's receipt and reports all the same.
    server = json.loads((out / "control" / "server.json").read_text())
    [receipt] = server["receipts"]
    assert receipt["guard"]["violations"] > 0 and receipt["guard"]["first_violation"]


def test_qualify_with_no_url_runs_the_sim_on_both_sides_as_the_demo(tmp_path: Path) -> None:
    write_scenario(tmp_path / "tiny.toml", TINY_SIM)
    proc = run_cli("qualify", "tiny.toml", "--out", "q", "--quiet")
    assert proc.returncode in (0, 2), proc.stdout + proc.stderr
    assert any(line.startswith("qualify tiny: ") for line in proc.stdout.splitlines())
    doc = json.loads((tmp_path / "q" / "qualify.json").read_text())
    assert doc["command"] == "qualify" and doc["control"]["c128a_layout"] == "packed"
    if doc["candidate"] is not None:  # the control reproduced: the fix ran beside it
        assert doc["candidate"]["c128a_layout"] == "capacity"
    # The help says where the targets come from.
    text = " ".join(run_cli("qualify", "--help").stdout.split())
    assert "[qualify.control.sim]" in text and "[qualify.candidate.sim]" in text
    assert "exactly what `demo` runs" in text


@pytest.mark.parametrize("given", ["--control", "--candidate"])
def test_qualify_with_one_url_says_what_is_missing(given: str, tmp_path: Path) -> None:
    proc = run_cli("qualify", "sim-smoke", given, "http://127.0.0.1:1", "--out", "q")
    assert proc.returncode == 3
    [line] = proc.stderr.strip().splitlines()
    missing = "--candidate" if given == "--control" else "--control"
    assert line.startswith("dsv4-qual: error: qualify needs a ")
    assert f"{given} was given without {missing}" in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "q").exists()


def test_a_control_that_did_not_reproduce_states_no_meaningless_bound(
        fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    sc = write_scenario(tmp_path / "c.toml", BARE, load={"concurrency": 4, "measurement": 8},
                        workload={"kind": "tool-turn"},
                        gate={"role": "control", "fail_on": ["stuck_in_reasoning"]})
    out = tmp_path / "o"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    assert proc.returncode == 1, proc.stdout
    assert "0/8 reproduced the bug: did not reproduce" in proc.stdout
    assert "rate >" not in proc.stdout
    md = (out / "report.md").read_text()
    assert "0/8: did not reproduce." in md and "&gt; 0.00%" not in md and "> 0.00%" not in md
    assert "the control did not reproduce it" in md and "above 0%" not in md
    page = (out / "report.html").read_text()
    assert "Did not" in page and "Reproduction rate &gt;" not in page


def test_ctrl_c_ends_the_progress_line_interrupted_not_done(fake_server, tmp_path: Path,
                                                            monkeypatch) -> None:
    from loadgen.engine.progress import Progress

    _, srv = fake_server(("ok",))
    sc = write_scenario(tmp_path / "s.toml", BARE, load={"concurrency": 2, "measurement": 200},
                        gate={"prove_below": 0.5})
    sent = _signal_during(monkeypatch, Progress, "update")
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "o"))
    assert sent == [1] and proc.returncode == 130, proc.stdout
    [last] = [line for line in proc.stderr.splitlines() if line.startswith("measurement: ")
              and "done," in line][-1:]
    assert last.endswith(" (interrupted)") and "(done)" not in proc.stderr, proc.stderr


def test_no_rate_bound_for_replies_that_never_came(fake_server, tmp_path: Path) -> None:
    # Every request answered by an error, all of them within max_infra_errors: not a
    # clean pass of "0/8 failed, rate < ...", and no bound anywhere.
    fake, srv = fake_server(("http_500",))
    sc = write_scenario(tmp_path / "s.toml", BARE, load={"concurrency": 4, "measurement": 8},
                        request={"max_tokens": 64},
                        gate={"prove_below": 0.5, "max_infra_errors": 8})
    out = tmp_path / "o"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    assert fake.counts == {"http_500": 8}
    assert proc.returncode == 2, proc.stdout
    line = proc.stdout.strip().splitlines()[-1]
    assert "RUN INVALID (exit 2): no reply came from the model — 0 measured (8 sent, 8 of " \
           "them not answered by the model: http_error/timeout/stream_error, not counted)" \
        in line
    assert "rate <" not in line and "0/8" not in line
    gate = json.loads((out / "summary.json").read_text())["gate"]
    assert gate["upper_bound_95"] is None and gate["detectable_rate_95"] is None
    assert gate["statement"].startswith("No reply came from the model: this run proves nothing")
    md = (out / "report.md").read_text()
    assert "Bound:" not in md and "at 95% confidence" not in md
    assert "Failure rate &lt;" not in (out / "report.html").read_text()


def test_a_phase_stops_once_its_infrastructure_errors_are_over_the_limit(
        fake_server, tmp_path: Path) -> None:
    # The run: every request refused with HTTP 400 (max_tokens over the server's
    # max_model_len, which this server does not state, so nothing could be checked first).
    fake, srv = fake_server(("ok",), max_model_len=4096, state_max_model_len=False)
    sc = write_scenario(tmp_path / "s.toml", BARE,
                        load={"concurrency": 4, "priming": 64, "measurement": 64},
                        request={"max_tokens": 16384}, gate={"prove_below": 0.1})
    out = tmp_path / "o"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    assert proc.returncode == 2, proc.stdout
    assert sum(fake.counts.values()) <= 8  # not the 128 planned: at most what was in flight
    line = proc.stdout.strip().splitlines()[-1]
    assert ("RUN INVALID (exit 2): no reply came from the model — priming stopped early: 1 "
            "infrastructure error (http_error/timeout/stream_error), more than the 0 "
            "gate.max_infra_errors allows") in line
    assert "the first: HTTP 400: 400: max_tokens=16384 cannot be greater than " \
           "max_model_len=4096." in line
    assert "rate <" not in line
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert {r["phase"] for r in records} == {"priming"}  # the measurement never started
    # What was in flight when it stopped is kept, as interrupted, with the reason.
    cut = [r for r in records if r["verdicts"] == ["interrupted"]]
    assert all("priming stopped early" in r["error"] for r in cut)
    assert sum(r["verdicts"] == ["http_error"] for r in records) >= 1


def test_a_run_that_cannot_fit_the_servers_context_sends_nothing(fake_server,
                                                                  tmp_path: Path) -> None:
    # The run: max_tokens 16384 against a server that states max_model_len 4096.
    fake, srv = fake_server(("ok",), max_model_len=4096)
    out = tmp_path / "o"
    proc = run_cli("run", "pr-51318", "--base-url", srv.url, "--out", str(out))
    assert proc.returncode == 2, proc.stdout
    assert sum(fake.counts.values()) == 0 and fake.bodies == []  # not one request sent
    line = proc.stdout.strip().splitlines()[-1]
    assert (f"RUN INVALID (exit 2): nothing sent — server {srv.url} serves fake-dsv4 with "
            "max_model_len 4096: max_tokens 16384 alone is more than that") in line
    assert "--max-model-len above 16" in line and "--accept-weaker-load" in line
    assert "rate <" not in line and "0/0" not in line
    assert not (out / "records.jsonl").exists()


LONG = {"load": {"concurrency": 2, "priming": None, "measurement": 4},
        "request": {"max_tokens": 2048},
        "workload": {"kind": "long-context", "context_tokens": [3000]},
        "gate": {"prove_below": 0.6}}


def test_the_longest_prompt_counts_and_every_server_is_checked(fake_server,
                                                                tmp_path: Path) -> None:
    sc = write_scenario(tmp_path / "s.toml", LONG)
    roomy, first = fake_server(("ok",), max_model_len=8192)
    tight, second = fake_server(("ok",), max_model_len=4096)
    proc = run_cli("run", str(sc), "--base-url", first.url, "--base-url", second.url,
                   "--out", str(tmp_path / "o"), "--quiet")
    assert proc.returncode == 2, proc.stdout
    assert sum(roomy.counts.values()) == sum(tight.counts.values()) == 0
    # 2048 alone fits 4096; with the 3000-token document (by the server's tokenizer) not.
    assert f"server {second.url} serves fake-dsv4 with max_model_len 4096: max_tokens 2048 " \
           "plus the longest prompt (at least" in proc.stdout
    assert "tokens by the server's tokenizer" in proc.stdout
    # The same run against the roomy server alone fits and is sent.
    proc = run_cli("run", str(sc), "--base-url", first.url, "--out", str(tmp_path / "p"),
                   "--quiet")
    assert proc.returncode == 0, proc.stdout
    assert sum(roomy.counts.values()) == 4


def test_a_server_that_does_not_state_its_context_is_not_checked(fake_server,
                                                                 tmp_path: Path) -> None:
    sc = write_scenario(tmp_path / "s.toml", LONG)
    fake, srv = fake_server(("ok",), max_model_len=4096, state_max_model_len=False)
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "o"))
    assert f"{srv.url} does not state max_model_len for fake-dsv4" in proc.stderr
    assert proc.returncode == 0 and sum(fake.counts.values()) == 4  # the fake lets them in


def test_the_rate_is_of_replies_requests_without_one_do_not_tighten_the_bound(
        fake_server, tmp_path: Path) -> None:
    from loadgen.bounds import upper_bound

    # 1 in 4 measured requests gets HTTP 500, within max_infra_errors: the run is valid,
    # and its bound is that of the 12 replies, not of 16 requests "that did not fail".
    _, srv = fake_server(("ok", "ok", "ok", "http_500"))
    sc = write_scenario(tmp_path / "s.toml", BARE, load={"concurrency": 4, "measurement": 16},
                        request={"max_tokens": 64},
                        gate={"prove_below": 0.5, "max_infra_errors": 4, "min_measured": 8})
    out = tmp_path / "o"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stdout
    gate = json.loads((out / "summary.json").read_text())["gate"]
    assert (gate["measured"], gate["infra_errors"], gate["failures"]) == (12, 4, 0)
    assert gate["upper_bound_95"] == pytest.approx(upper_bound(0, 12))
    assert f"0/12 failed, rate < {100 * upper_bound(0, 12):.2f}% @95%" in proc.stdout
    assert ("4 further measured request(s) got no reply from the model (infrastructure "
            "errors, within the limit of 4) and are not counted in the rate.") in gate["statement"]


def test_an_ingress_without_health_is_ready_by_its_models_and_says_so(
        fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",), route_health=False)
    out = tmp_path / "o"
    proc = run_cli("run", SMOKE, "--base-url", srv.url, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (f"{srv.url}: readiness is judged by GET /v1/models alone (GET /health answered "
            "404: not routed to the server)") in proc.stderr
    run = json.loads((out / "run.json").read_text())
    assert [r["readiness"] for r in run["run"]["ready"]] == [
        "GET /v1/models alone (GET /health answered 404: not routed to the server)"]
    assert "| readiness | " in (out / "report.md").read_text()
    # Not ready is still not ready: /v1/models must answer.
    fake.healthy = False
    _, reason = _waiting_lines(srv.url, 0.4)
    assert "up but not ready (GET /v1/models answered 503)" in reason
    assert "GET /v1/models alone" in reason


def test_a_soak_sees_an_ingress_without_health_as_ready(fake_server) -> None:
    from loadgen.targets.epochs import observe

    fake, srv = fake_server(("ok",), route_health=False)
    assert observe(srv.url).ready
    fake.healthy = False
    assert not observe(srv.url).ready


@pytest.mark.parametrize("case", ["missing", "a file", "an empty folder"])
def test_report_of_what_is_no_results_directory_says_what_it_is(tmp_path: Path,
                                                                 case: str) -> None:
    target = tmp_path / "x"
    if case == "a file":
        target.write_text("")
    elif case == "an empty folder":
        target.mkdir()
    proc = run_cli("report", str(target))
    assert proc.returncode == 3
    said = {"missing": "no such directory", "a file": "not a directory",
            "an empty folder": "not a dsv4-qual results directory"}[case]
    assert f"{target}: {said}" in proc.stderr


def test_run_json_is_the_result_for_a_program(fake_server, tmp_path: Path) -> None:
    import json as _json

    _, srv = fake_server()
    sc = write_scenario(tmp_path / "s.toml")
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--out", str(out), "--json", "--quiet",
                   env={"DSV4_QUAL_BASE_URL": srv.url})  # the URL from the environment
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = _json.loads(proc.stdout)
    assert (doc["exit_code"], doc["result"], doc["failures"], doc["measured"]) == (
        0, "PASSED", 0, 8)
    assert doc["results"] == str(out) and doc["statement"]
    assert _json.loads((out / "summary.json").read_text())["gate"]["exit_code"] == 0


def test_validate_json_gives_the_resolved_scenario() -> None:
    import json as _json

    proc = run_cli("validate", "release-gate", "--json")
    assert proc.returncode == 0
    doc = _json.loads(proc.stdout)
    assert doc["valid"] and doc["required_measured"] == 998
    assert doc["resolved"]["workload"]["kind"] == "mix"
    assert doc["resolved"]["load"]["idle_connection_s"] == 3.0


def test_the_api_key_comes_from_the_variable_the_command_line_names(
        fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server()
    sc = write_scenario(tmp_path / "s.toml")
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "out"),
                   "--quiet", "--api-key-env", "MY_KEY", env={"MY_KEY": "s3cret"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any(h.get("authorization") == "Bearer s3cret" for h in fake.headers)
    unset = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "o2"),
                    "--api-key-env", "NOT_SET_ANYWHERE")
    assert unset.returncode == 3 and "NOT_SET_ANYWHERE is not set" in unset.stderr


def test_shell_completion_completes_commands_and_options() -> None:
    env = {"_DSV4_QUAL_COMPLETE": "bash_complete", "COMP_WORDS": "dsv4-qual ru",
           "COMP_CWORD": "1"}
    assert "plain,run" in run_cli(env=env).stdout
    env["COMP_WORDS"], env["COMP_CWORD"] = "dsv4-qual run smoke --transp", "3"
    assert "plain,--transport" in run_cli(env=env).stdout
    script = run_cli(env={"_DSV4_QUAL_COMPLETE": "bash_source"}).stdout
    assert "complete " in script and "_dsv4_qual_completion" in script


def test_every_option_of_every_command_says_what_it_does() -> None:
    """`--help` of each command (the sim's included) explains each of its options."""
    import click

    from loadgen.cli import _load_command_plugins, cli

    _load_command_plugins()
    silent = [f"{name} {param.opts[0]}"
              for name, command in cli.commands.items()
              for param in command.params
              if isinstance(param, click.Option) and not param.hidden
              and not (param.help or "").strip()]
    assert "sim" in cli.commands
    assert not silent, f"options without help: {silent}"
