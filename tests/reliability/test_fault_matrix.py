"""Every fault, through `dsv4-qual run` against a server that misbehaves on purpose.

Fast tier: one in-process run meets every fault at once; each must land under its
verdict, the run must go on to the end, and the summary's counts must equal what the
server says it did. Slow tier: the same per fault, through the real console process
(exit code and stderr as a CI job sees them).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from loadgen.taxonomy import DEFAULT_FAIL_ON
from tests.loadgen.conftest import run_cli, run_cli_process
from tests.support.openai_fake import MODE_VERDICTS
from tests.support.scenario_files import write_scenario

SC = {"load": {"connect_timeout_s": 2, "first_token_timeout_s": 1.5, "idle_timeout_s": 1,
               "total_timeout_s": 6},
      # Not greedy: the faults' identical bodies get different answers, and `divergent`
      # (run level) would be written into records this test counts one verdict each.
      "request": {"max_tokens": 48, "temperature": 0.7},
      # Half of the 8 measured may be a fault without a reply.
      "gate": {"min_measured": 4, "max_infra_errors": 8}}

# Every behaviour of the fake but the healthy replies themselves.
MATRIX = [(mode, verdict) for mode, verdict in MODE_VERDICTS.items()
          if mode not in ("ok", "answer")]
# What the default gate fails on (exit 1); every other fault is recorded and the gate
# holds (infrastructure errors stay under max_infra_errors here).
OUTPUT_FAILURES = {str(v) for v in DEFAULT_FAIL_ON}


def test_every_fault_in_one_run_gets_its_verdict_and_the_run_goes_on(
        fake_server, tmp_path: Path) -> None:
    modes = [mode for mode, _ in MATRIX if mode != "slow_total"]  # its own body settings
    fake, srv = fake_server(("ok", *modes))
    n = 2 * (len(modes) + 1)
    # Every fault in flight at once on a busy two-core machine: a healthy reply can be
    # seconds late to its first token. The stalls sleep 30 s, so wider timeouts still
    # catch every one of them.
    sc = write_scenario(tmp_path / "f.toml", SC,
                        load={"concurrency": n, "measurement": n, "first_token_timeout_s": 8,
                              "idle_timeout_s": 5, "total_timeout_s": 25},
                        gate={"max_infra_errors": n})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    m = json.loads((out / "summary.json").read_text())["phases"]["measurement"]
    assert len((out / "records.jsonl").read_text().splitlines()) == n == m["requests"]
    assert fake.counts == {mode: 2 for mode in ("ok", *modes)}
    expected = Counter({"ok": 2})
    for mode in modes:
        expected[MODE_VERDICTS[mode]] += 2
    primary = Counter(m["primary_verdicts"])
    assert primary == expected, (primary, expected)
    assert proc.returncode == 1  # output failures are among them: the gate fails, validly


@pytest.mark.slow
@pytest.mark.parametrize("mode,verdict", MATRIX)
def test_fault_gets_its_verdict_and_the_run_goes_on(fake_server, tmp_path: Path, mode: str,
                                                    verdict: str) -> None:
    fake, srv = fake_server(("ok", mode))
    # slow_total's own body settings: a reply slow enough to pass the total timeout.
    slow = {"extra_body": {"fake_gap_s": 0.05, "fake_tokens": 400}}
    sc = write_scenario(tmp_path / "f.toml", SC,
                        request=slow if mode == "slow_total" else {})
    out = tmp_path / "out"
    proc = run_cli_process("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet",
                           timeout=180)
    summary = json.loads((out / "summary.json").read_text())
    m = summary["phases"]["measurement"]
    records = (out / "records.jsonl").read_text().splitlines()
    assert len(records) == 8 == m["requests"]  # nothing lost, nothing stopped the run
    assert fake.counts == {"ok": 4, mode: 4}
    if verdict == "ok":
        assert m["verdicts"].get("ok") == 8, m["verdicts"]
    else:
        assert m["verdicts"].get(verdict) == 4, m["verdicts"]
        assert m["verdicts"].get("ok") == 4
    expected_code = 1 if verdict in OUTPUT_FAILURES else 0
    assert proc.returncode == expected_code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_infrastructure_errors_over_the_limit_make_the_run_invalid(fake_server,
                                                                   tmp_path: Path) -> None:
    _, srv = fake_server(("ok", "http_500"))
    sc = write_scenario(tmp_path / "f.toml", SC, gate={"max_infra_errors": 3})
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(tmp_path / "o"),
                   "--quiet")
    assert proc.returncode == 2
    # The fourth error stops the measurement: the reason names the count, the limit and
    # the first error.
    assert ("measurement stopped early: 4 infrastructure errors (http_error/timeout/"
            "stream_error), more than the 3 gate.max_infra_errors allows") in proc.stdout
    assert "the first: HTTP 500" in proc.stdout
