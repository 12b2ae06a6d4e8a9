"""Each renderer on its own, fed a RunReport judged from a results directory in-process."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from loadgen.files import rounded
from loadgen.judge.gate import run_report
from loadgen.judge.gate.qualification import decide
from loadgen.report import write_qualify_reports, write_run_reports
from loadgen.report.html import render_html
from loadgen.report.junit import render_junit
from loadgen.report.markdown import render_markdown
from loadgen.report.qualify_doc import qualify_document
from loadgen.report.qualify_html import render_qualify_html
from loadgen.report.qualify_junit import render_qualify_junit
from loadgen.report.qualify_markdown import render_qualify_markdown
from loadgen.report.summary import summary_document
from loadgen.run_facts import RunFacts
from loadgen.scenario import GateConfig, Scenario
from tests.support.reports import judged, record

LOOP = "Wait, the user wants to upgrade XEHM4B. "


def stuck(seq: int) -> object:
    return record(seq, verdicts=["stuck_in_reasoning", "reasoning_loop"], finish_reason="length",
                  reasoning=LOOP * 40 + "<b>&</b>")


def mixed_run(tmp_path: Path, name: str = "run", role: str = "candidate"):  # type: ignore[no-untyped-def]
    records = [record(0, phase="priming"), record(1, phase="priming")]
    records += [record(i) for i in range(2, 10)] + [stuck(10), stuck(11)]
    scenario = Scenario(name="mixed", gate=GateConfig(role=role, prove_below=0.5))
    return judged(tmp_path / name, records, scenario=scenario)


def test_summary_keeps_the_public_keys(tmp_path: Path) -> None:
    summary = summary_document(mixed_run(tmp_path))
    assert summary["scenario"] == "mixed" and summary["run_id"] == "r"
    measurement = summary["phases"]["measurement"]
    assert measurement["requests"] == 10
    assert measurement["verdicts"] == {"ok": 8, "reasoning_loop": 2, "stuck_in_reasoning": 2}
    gate = summary["gate"]
    for key in ("role", "passed", "failures", "allowed", "upper_bound_95", "exit_code"):
        assert key in gate
    assert (gate["failures"], gate["exit_code"], gate["passed"]) == (2, 1, False)
    json.dumps(summary)  # a JSON document, nothing else


def test_markdown_states_the_verdict_the_bound_and_the_failures(tmp_path: Path) -> None:
    text = render_markdown(mixed_run(tmp_path))
    assert text.startswith("# dsv4-qual: mixed (candidate)")
    assert "**GATE FAILED** (exit 1)" in text and "2 of 10 measured requests" in text
    assert "Bound: 2 of 10 failed" in text
    assert "## First failures (measurement)" in text and "### seq 10" in text
    assert "| stuck_in_reasoning | 2 | 20.0% |" in text


def test_markdown_of_a_control_states_the_reproduction_rate(tmp_path: Path) -> None:
    text = render_markdown(mixed_run(tmp_path, role="control"))
    assert "**PASSED** (exit 0)" in text and "Control reproduction rate: 2/10 (> " in text
    assert "Bound:" not in text


def test_junit_has_one_testcase_per_check_and_gated_verdict(tmp_path: Path) -> None:
    report = mixed_run(tmp_path)
    suite = ET.fromstring(render_junit(report)).find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) >= {c.name for c in report.gate.checks}
    assert cases["verdict stuck_in_reasoning"].find("failure") is not None
    assert cases["verdict empty_content"].find("failure") is None  # gated, none seen
    assert int(suite.get("failures", "0")) == sum(
        1 for c in cases.values() if c.find("failure") is not None)


def test_html_is_one_escaped_page_with_decodable_plots(tmp_path: Path) -> None:
    page = render_html(mixed_run(tmp_path))
    assert "<b>&</b>" not in page and "&lt;b&gt;&amp;&lt;/b&gt;" in page
    uris = page.split('src="data:image/png;base64,')[1:]
    assert len(uris) >= 2  # request order, number in flight
    for uri in uris:
        assert base64.b64decode(uri.split('"', 1)[0])[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_page_plots_the_series_its_run_worked_out_once(tmp_path: Path,
                                                          monkeypatch) -> None:  # type: ignore[no-untyped-def]
    worked_out: list[tuple[str, int]] = []
    real = {name: getattr(run_report, name)
            for name in ("failure_rate_by_order", "failure_rate_by_in_flight")}

    def counting(name: str):  # type: ignore[no-untyped-def]
        def counted(timeline):  # type: ignore[no-untyped-def]
            worked_out.append((name, len(timeline)))
            return real[name](timeline)
        return counted

    for name in real:
        monkeypatch.setattr(run_report, name, counting(name))
    control = judged(tmp_path / "q" / "control",
                     [record(i) for i in range(4)] + [stuck(i) for i in range(4, 10)],
                     scenario=Scenario(name="mixed", gate=GateConfig(role="control")))
    candidate = judged(tmp_path / "q" / "candidate", [record(i) for i in range(10)] + [stuck(10)],
                       scenario=Scenario(name="mixed", gate=GateConfig(prove_below=0.5)))
    q = decide(tmp_path / "q", "mixed", control, candidate)
    for side in (control, candidate):
        render_html(side)
    render_qualify_html(q, qualify_document(q))
    # Each run's series once, for its own page and the qualification's, from its timeline.
    assert sorted(worked_out) == [("failure_rate_by_in_flight", 10),
                                  ("failure_rate_by_in_flight", 11),
                                  ("failure_rate_by_order", 10), ("failure_rate_by_order", 11)]
    assert control.failure_by_order == real["failure_rate_by_order"](control.stats.timeline())


def test_every_run_report_is_written(tmp_path: Path) -> None:
    report = mixed_run(tmp_path)
    summary = write_run_reports(report, html=False)
    names = {p.name for p in report.out_dir.iterdir()}
    assert {"summary.json", "report.md", "junit.xml"} <= names and "report.html" not in names
    assert json.loads((report.out_dir / "summary.json").read_text()) == json.loads(
        json.dumps(summary))


def test_qualification_pages(tmp_path: Path) -> None:
    # 2 of 10 reproduced beside 0 of 10: the sides are not shown to differ.
    weak = mixed_run(tmp_path / "w", "control", role="control")
    candidate = judged(tmp_path / "q" / "candidate", [record(i) for i in range(10)],
                       scenario=Scenario(name="mixed", gate=GateConfig(prove_below=0.5)))
    assert decide(tmp_path / "w", "mixed", weak, candidate).verdict == "NOT PROVEN"
    control = judged(tmp_path / "q" / "control",
                     [record(i) for i in range(4)] + [stuck(i) for i in range(4, 10)],
                     scenario=Scenario(name="mixed", gate=GateConfig(role="control")))
    q = decide(tmp_path / "q", "mixed", control, candidate)
    assert (q.exit_code, q.verdict) == (0, "QUALIFIED")
    doc = qualify_document(q)
    assert doc.control.results_dir == "control"
    assert doc.to_dict()["candidate_upper_bound_95"] is not None
    text = render_qualify_markdown(doc)
    assert "QUALIFIED (exit 0)" in text and "| gated failures | 6 | 0 |" in text
    assert "- Difference: Fisher's exact test, one-sided on gated failures, control 6/10 " \
           "vs candidate 0/10: p = 0.00542 < 0.05" in text
    suite = ET.fromstring(render_qualify_junit(q, doc)).find("testsuite")
    assert suite is not None and suite.get("failures") == "0" and suite.get("errors") == "0"
    written = write_qualify_reports(q)
    # qualify.json is the document's dict, rounded for people to read.
    assert json.loads((tmp_path / "q" / "qualify.json").read_text()) == json.loads(
        json.dumps(rounded(written.to_dict())))
    assert (tmp_path / "q" / "report.html").read_text().count("data:image/png") == 3


def test_a_control_that_did_not_reproduce_skips_the_candidate(tmp_path: Path) -> None:
    clean_control = judged(tmp_path / "c", [record(i) for i in range(4)],
                           scenario=Scenario(name="s", gate=GateConfig(role="control")),
                           facts=RunFacts(run_id="r", scenario="s", base_urls=["http://x"]))
    q = decide(tmp_path, "s", clean_control, None)
    assert (q.exit_code, q.verdict) == (2, "INVALID")
    suite = ET.fromstring(render_qualify_junit(q, qualify_document(q))).find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("errors") == "1"
    # No reproduction bounds nothing: the pages say so, never "> 0.00%".
    doc = qualify_document(q)
    assert "control: 0 of 4 reproduced the bug;" in doc.headline
    text = render_qualify_markdown(doc)
    assert "none: did not reproduce" in text and "0.00%" not in text
