"""Receipts count for the server start that answered, and prove what they say, through `run`.

Each test plays a server (the loopback fake, which exports its server id on /metrics as
the plugin does, or the embedded sim) with a receipt directory laid out the way a
server that tries to pass a candidate gate would leave it: receipts of another start, of
one endpoint out of two, of half the ranks, of a DeepSeek-V4 model that made no C128A
builder, with stride violations. None of them exits 0; an honest server does.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.loadgen.conftest import run_cli
from tests.support.receipts import api_server, parallel, receipt, write_receipts
from tests.support.scenario_files import write_scenario

SCENARIO = {"gate": {"prove_below": 0.5}}
REQUIRED = {"require_receipts": True}


def run(tmp_path: Path, urls: list[str], receipts: Path, gate: dict = REQUIRED
        ) -> tuple[int, dict, str]:
    sc = write_scenario(tmp_path / "s.toml", SCENARIO, gate=gate)
    out = tmp_path / "out"
    args = [a for url in urls for a in ("--base-url", url)]
    proc = run_cli("run", str(sc), *args, "--receipts-dir", str(receipts), "--out", str(out),
                   "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    return proc.returncode, summary, proc.stdout + proc.stderr


def receipts_check(summary: dict) -> dict:
    (check,) = [c for c in summary["gate"]["checks"] if c["name"].startswith("patch receipts")]
    return check


def test_an_honest_server_passes_on_the_receipts_of_its_start(fake_server,
                                                               tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",))
    receipts = write_receipts(tmp_path / "r", [
        api_server(1, fake.server_id), receipt(2, fake.server_id),
        receipt(3, "an-earlier-start", layout="packed")])  # yesterday's, on the volume
    code, summary, output = run(tmp_path, [srv.url], receipts)
    assert code == 0, output
    assert "1 model process(es) ran capacity" in receipts_check(summary)["message"]
    selection = summary["target"]["receipts_selection"]
    assert (selection["kept"], selection["ignored"]) == (2, 1)
    assert selection["set_aside"][0]["file"] == "host-3.json"


def test_two_endpoints_with_receipts_from_one_are_invalid(fake_server,
                                                         tmp_path: Path) -> None:
    first, a = fake_server(("ok",))
    _, b = fake_server(("ok",))  # a replica whose processes wrote no receipt here
    receipts = write_receipts(tmp_path / "r", [api_server(1, first.server_id),
                                               receipt(2, first.server_id)])
    code, summary, output = run(tmp_path, [a.url, b.url], receipts)
    assert code == 2, output
    message = receipts_check(summary)["message"]
    assert "no receipt from a process that runs the model for " + b.url in message
    assert message in output


@pytest.mark.parametrize("plugin_after_restart", [False, True],
                         ids=["restart-without-plugin", "restart-without-receipts"])
def test_a_restart_never_passes_on_the_previous_starts_receipts(
        fake_server, tmp_path: Path, plugin_after_restart: bool) -> None:
    fake, srv = fake_server(("ok",), expose_server_id=plugin_after_restart)
    earlier = fake.server_id
    fake.restart()  # a new start, whose processes wrote nothing where the run reads
    receipts = write_receipts(tmp_path / "r", [
        # Written a second ago: a clock with any margin would count them.
        {**api_server(1, earlier), "time": time.time() - 1},
        {**receipt(2, earlier), "time": time.time() - 1}])
    code, summary, output = run(tmp_path, [srv.url], receipts)
    assert code == 2, output
    message = receipts_check(summary)["message"]
    if plugin_after_restart:
        assert "no patch receipt in" in message and "no measured endpoint's current start" \
            in message
    else:
        assert "exports no server id (dsv4_qual_server_info in /metrics)" in message
    # Not even when the scenario does not require receipts: found, they cannot be tied.
    if not plugin_after_restart:
        (tmp_path / "out").rename(tmp_path / "required")
        code, _, output = run(tmp_path, [srv.url], receipts, gate={})
        assert code == 2, output


def test_a_server_up_for_hours_without_a_start_time_passes_on_its_own_receipts(
        fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",), expose_start_time=False)
    hours_ago = time.time() - 5 * 3600
    fake.start_time = hours_ago
    receipts = write_receipts(tmp_path / "r", [
        {**api_server(1, fake.server_id), "time": hours_ago},
        {**receipt(2, fake.server_id), "time": hours_ago + 60}])
    code, summary, output = run(tmp_path, [srv.url], receipts)
    assert code == 0, output
    assert summary["target"]["receipts_selection"]["kept"] == 2


def test_a_deepseek_v4_process_that_made_no_c128a_builder_is_invalid(fake_server,
                                                                     tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",))
    receipts = write_receipts(tmp_path / "r", [
        api_server(1, fake.server_id), receipt(2, fake.server_id, c128a=0, calls=0)])
    code, summary, output = run(tmp_path, [srv.url], receipts)
    assert code == 2, output
    assert "loaded a DeepSeek-V4 model (DeepseekV4ForCausalLM), which has C128A layers" in \
        receipts_check(summary)["message"]
    # Its drafter alone says so too.
    receipts = write_receipts(tmp_path / "r2", [receipt(
        2, fake.server_id, c128a=0, calls=0, architectures=["DeepSeekV4MTPModel"],
        model_type="deepseek_mtp", compress_ratios=[])])
    (tmp_path / "out").rename(tmp_path / "first")
    assert run(tmp_path, [srv.url], receipts)[0] == 2


def test_deepseek_v41_is_recognised_by_its_architecture_and_config(fake_server,
                                                                  tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",))
    v41 = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
           "c128a": 0, "calls": 0}
    receipts = write_receipts(tmp_path / "r", [
        api_server(1, fake.server_id), receipt(2, fake.server_id, compress_ratios=[0, 1, 2],
                                               **v41)])
    code, summary, output = run(tmp_path, [srv.url], receipts)
    assert code == 0, output
    assert "DeepSeek-V4.1: compress ratios 0, 1, 2) has no C128A layers" in \
        receipts_check(summary)["message"]
    assert "the gate rests on the replies alone" in summary["gate"]["statement"]
    # The name without the config: a V4.1 that cannot be told from a missed builder.
    receipts = write_receipts(tmp_path / "r2", [receipt(2, fake.server_id,
                                                        compress_ratios=[128], **v41)])
    (tmp_path / "out").rename(tmp_path / "first")
    assert run(tmp_path, [srv.url], receipts)[0] == 2


def test_stride_violations_fail_a_candidate_and_the_statement_names_them(
        fake_server, tmp_path: Path) -> None:
    fake, srv = fake_server(("ok",))
    # The scenario leaves gate.fail_on_stride_violations off, as release-gate does.
    receipts = write_receipts(tmp_path / "r", [
        api_server(1, fake.server_id), receipt(2, fake.server_id, violations=3)])
    code, summary, output = run(tmp_path, [srv.url], receipts)
    assert code == 1, output
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 8}  # every reply clean
    statement = summary["gate"]["statement"]
    assert "stride guard counted 3 C128A stride violation(s) in VLLM::Worker (pid 2)" in \
        statement
    assert "the first at builder call 2: decode rows at stride 64, buffer row stride 640" in \
        statement
    assert "left rows off the capacity stride" in receipts_check(summary)["message"]


def test_a_headless_nodes_ranks_never_pass_for_the_heads(fake_server, tmp_path: Path) -> None:
    # vLLM multi-node data parallel, internal load balancing: the head's endpoint serves
    # ranks 0-3; ranks 2-3 run on a --headless node whose receipts name its own start.
    fake, srv = fake_server(("ok",))
    head = [receipt(10 + r, fake.server_id, place=parallel(dp_size=4, local=2, dp_index=r))
            for r in (0, 1)]
    headless = [receipt(20 + r, "the-headless-node", layout="packed",
                        place=parallel(dp_size=4, local=2, dp_index=r)) for r in (2, 3)]
    receipts = write_receipts(tmp_path / "r", [api_server(1, fake.server_id), *head,
                                               *headless])
    code, summary, output = run(tmp_path, [srv.url], receipts)
    assert code == 2, output
    message = receipts_check(summary)["message"]
    assert "serves 4 data-parallel rank(s), but only rank(s) 0, 1 wrote a receipt" in message
    assert "--headless" in message
    # Hybrid load balancing: each node's API fronts its own ranks, and says so.
    hybrid = [receipt(10 + r, fake.server_id,
                      place=parallel(dp_size=4, local=2, dp_index=r, hybrid=True))
              for r in (0, 1)]
    receipts = write_receipts(tmp_path / "r2", [api_server(1, fake.server_id), *hybrid])
    (tmp_path / "out").rename(tmp_path / "first")
    assert run(tmp_path, [srv.url], receipts)[0] == 0
    # A tensor-parallel group missing a worker is short too.
    tp = [receipt(30, fake.server_id, place=parallel(world=2, rank=0))]
    receipts = write_receipts(tmp_path / "r3", [api_server(1, fake.server_id), *tp])
    (tmp_path / "out").rename(tmp_path / "second")
    code, summary, _ = run(tmp_path, [srv.url], receipts)
    assert code == 2 and "worker(s) 0 of its 2" in receipts_check(summary)["message"]


SIM = {"target": {"sim": {"layout": "capacity", "max_model_len": 1024}},
       "request": {"max_tokens": 160},
       "workload": {"kind": "long-context", "context_tokens": [96, 256]},
       "gate": {"prove_below": 0.5, "require_receipts": True}}


def test_the_sim_ties_its_own_receipt_and_sets_an_earlier_starts_aside(tmp_path: Path) -> None:
    # A packed receipt of an earlier sim in the same directory: not this start's.
    receipts = write_receipts(tmp_path / "r", [receipt(1, "an-earlier-sim", layout="packed",
                                                       violations=5)])
    sc = write_scenario(tmp_path / "sim.toml", SIM, target={"receipts_dir": str(receipts)})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    server = json.loads((out / "server.json").read_text())
    (endpoint,) = server["receipts_selection"]["endpoints"]
    (counted,) = [r for r in server["receipts"] if r["counted"]]
    assert endpoint["problem"] is None and endpoint["server_ids"] == [counted["server"]["id"]]
    assert server["receipts_selection"]["set_aside"][0]["file"] == "host-1.json"
    assert "stride violation" not in json.loads((out / "summary.json").read_text())[
        "gate"]["statement"]


def test_a_sim_whose_builder_is_never_watched_is_still_invalid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Receipts flushed as each reply ends must not turn a builder nobody saw into a pass:
    the guard is on, but every call goes around it, so the receipt counts none."""
    from server_patch.guard import StrideGuard

    monkeypatch.setattr(StrideGuard, "wrap", lambda self, fn: fn)
    sc = write_scenario(tmp_path / "sim.toml", SIM,
                        target={"receipts_dir": str(tmp_path / "r")})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--out", str(out), "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert receipts_check(summary)["message"].startswith(
        "the C128A builder was not reached: 0 builder calls in every model process while "
        "8 requests were served")


# -- a receipts directory named but not there: a mistake in the command, said loudly ------


@pytest.mark.parametrize("shape", ["missing", "not_a_directory"])
def test_a_receipts_dir_that_is_not_there_is_not_a_passing_check(fake_server, tmp_path: Path,
                                                                 shape: str) -> None:
    _, srv = fake_server(("ok",))
    receipts = tmp_path / "recepits"  # the typo an operator makes
    if shape == "not_a_directory":
        receipts.write_text("a file")
    code, summary, output = run(tmp_path, [srv.url], receipts, gate={})
    assert code == 0  # receipts not required: replies alone decide, as before
    check = receipts_check(summary)
    said = "does not exist" if shape == "missing" else "is not a directory"
    assert check["passed"] and check["skipped"], check
    assert f"the receipts directory {receipts} {said}" in check["message"]
    # The result line says it, in capitals, beside PASSED.
    (line,) = [x for x in output.splitlines() if "PASSED (exit 0)" in x]
    assert "; NOT CHECKED: patch receipts" in line and str(receipts) in line
    assert summary["gate"]["not_checked"] == [f"{check['name']}: {check['message']}"]
    # junit.xml: that case is skipped, never a pass; the Markdown and HTML reports say so.
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("skipped") == "1"
    (case,) = [c for c in suite.iter("testcase") if c.get("name") == check["name"]]
    skipped = case.find("skipped")
    assert skipped is not None and said in skipped.get("message", "")
    assert "**Not checked:** patch receipts" in (tmp_path / "out" / "report.md").read_text()
    assert 'id="not-checked"' in (tmp_path / "out" / "report.html").read_text()


def test_a_required_receipts_dir_that_is_not_there_makes_the_run_invalid(
        fake_server, tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    code, summary, output = run(tmp_path, [srv.url], tmp_path / "absent")
    assert code == 2
    check = receipts_check(summary)
    assert not check["passed"] and not check["skipped"]
    assert f"the receipts directory {tmp_path / 'absent'} does not exist" in check["message"]
    assert "RUN INVALID (exit 2)" in output and "absent does not exist" in output


def test_what_the_run_saw_stands_when_its_report_is_rebuilt(fake_server,
                                                           tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    receipts = tmp_path / "later"
    code, _, _ = run(tmp_path, [srv.url], receipts, gate={})
    receipts.mkdir()  # made after the run: the run did not see it
    proc = run_cli("report", str(tmp_path / "out"))
    assert proc.returncode == code == 0
    assert "NOT CHECKED: patch receipts" in proc.stdout


def test_an_empty_receipts_dir_stays_a_server_that_wrote_none(fake_server,
                                                             tmp_path: Path) -> None:
    _, srv = fake_server(("ok",))
    receipts = tmp_path / "empty"
    receipts.mkdir()
    code, summary, output = run(tmp_path, [srv.url], receipts, gate={})
    check = receipts_check(summary)
    assert code == 0 and check["passed"] and not check["skipped"]
    assert "NOT CHECKED" not in output and summary["gate"]["not_checked"] == []
