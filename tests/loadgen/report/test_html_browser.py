"""The reports open in a real (headless) browser and every plot decodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.loadgen.conftest import run_cli
from tests.loadgen.targets.test_server_telemetry import iso
from tests.support.browser import headless_chromium, images_of, require_browser
from tests.support.receipts import parallel
from tests.support.scenario_files import write_scenario

#: A real browser: CI runs it (`pytest -m services`), the README's test command does not.
pytestmark = pytest.mark.services

SC = {"load": {"priming": 4, "measurement": 16}, "workload": {"accounts": 64},
      "gate": {"min_measured": 1}, "telemetry": {"scrape_interval_s": 0.05}}


def test_qualify_and_run_reports_render_with_every_plot(fake_server, tmp_path: Path) -> None:
    require_browser()  # before any work: skip (or fail in CI) early
    _, c = fake_server(("ok", "stuck"), token_delay_s=0.002)
    candidate, k = fake_server(("ok",), token_delay_s=0.002)
    receipts = tmp_path / "receipts"
    receipts.mkdir()
    (receipts / "gpu-0-7.json").write_text(json.dumps({
        "layout": "capacity", "vllm_version": "0.28.0", "patched": True,
        "time": iso(candidate.start_time + 1), "server": {"id": candidate.server_id},
        "guard": {"mode": "1", "calls": 40, "violations": 0},
        "model": {"loaded": True, "architectures": ["DeepseekV4ForCausalLM"],
                  "c128a_builders": 1, "parallel": parallel()}}))
    sc = write_scenario(tmp_path / "q.toml", SC)
    out = tmp_path / "qual"
    proc = run_cli("qualify", str(sc), "--control", c.url, "--candidate", k.url,
                   "--candidate-receipts-dir", str(receipts), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    pages = {"qualify": (out / "report.html", 3), "control": (out / "control" / "report.html", 9),
             "candidate": (out / "candidate" / "report.html", 8)}
    with headless_chromium() as browser:
        for name, (path, expected) in pages.items():
            images = images_of(browser, path.as_uri())
            assert len(images) == expected, (name, "; ".join(i["alt"] for i in images))
            broken = [i["alt"] for i in images
                      if not (i["complete"] and i["width"] > 0 and i["height"] > 0)]
            assert not broken, (name, broken)
            if name == "candidate":
                layout = browser.find_element("id", "layout").text
                assert layout.startswith("capacity"), layout
                alts = " ".join(i["alt"] for i in images)
                assert "Speculative decoding acceptance" in alts and "Throughput" in alts
                # a clean run has no failures to plot: the report says so instead of an empty axis
                assert "No request failed" in browser.find_element("tag name", "body").text
            if name == "qualify":
                verdict = browser.find_element("id", "verdict").text
                assert verdict.startswith("QUALIFIED (exit 0)"), verdict
