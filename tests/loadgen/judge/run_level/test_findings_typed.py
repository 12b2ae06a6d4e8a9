"""The findings reports read are typed: what the judge writes reads back whole.

Generated failing replies of every rule family are judged, their findings read through
`Findings.read` as every report reads them: no finding may be dropped or lose a field
on the way (a field renamed in the judge fails here, not as a line missing from a
report), and each family gets its line in the report.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from loadgen.judge.findings import Findings, findings_lines
from loadgen.judge.run_level import own_verdicts
from loadgen.judge.run_level.cross_talk import CrossTalk
from loadgen.judge.run_level.reference import ReferenceAgreement
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import ReferenceConfig, VerdictConfig
from tests.loadgen.judge.reply.test_judge_families import ENGLISH, _codes, _reply, record
from tests.support import broken_servers, broken_text

#: The first words of the report line each finding gets.
LINE_OF = {"stuck": "stuck:", "loop": "loop in the", "leak": "leak:",
           "garbled": "garbled", "tool_calls": "tool call:", "finish": "finish_reason:",
           "wrong_answer": "wrong answer:", "wrong_language": "wrong language:",
           "unfinished": "unfinished:", "cross_talk": "cross-talk:",
           "reference_mismatch": "unlike its solo reply"}


def _as_written(findings: dict[str, Any]) -> dict[str, Any]:
    """The findings as a line of records.jsonl holds them."""
    return orjson.loads(orjson.dumps(findings))


def _check(written: dict[str, Any]) -> set[str]:
    typed = Findings.read(written)
    for key, value in written.items():
        got = getattr(typed, key)
        dumped = got.model_dump(exclude_unset=True) if hasattr(got, "model_dump") else \
            [g.model_dump(exclude_unset=True) if hasattr(g, "model_dump") else g
             for g in got] if isinstance(got, list) else got
        assert dumped == value, (key, value, dumped)
    lines = findings_lines(typed)
    for key in written:
        if key in LINE_OF:
            assert any(line.startswith(LINE_OF[key]) for line in lines), (key, lines)
    return set(written)


def _reply_findings() -> list[dict[str, Any]]:
    found = []
    for seed in range(6):
        for words in (20, 80):
            for make in broken_text.TEXT_FAMILIES.values():
                for place in ("reasoning", "content", "argument"):
                    found.append(record(make(seed, words), place).findings)
            found.append(record(broken_text.other_language(seed, words), "content",
                                ENGLISH).findings)
            found.append(record(broken_text.cut_mid_sentence(seed, words), "content",
                                ENGLISH).findings)
            found.append(record(broken_text.ramble(seed, words), "content", ENGLISH,
                                finish="length").findings)
            unit = random.Random(seed).choice(["Let me check the plan again. ",
                                               "Wait, the account. "])
            stuck = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                                  endpoint="http://x", item_id="i", finish_reason="length",
                                  reasoning=unit * (words // 2))
            classify(stuck, VerdictConfig())
            found.append(stuck.findings)
            found.append(record(f"Done.</think> {unit}", "content").findings)
            found.append(record("The plan is", "content", finish="abort").findings)
    return [f for f in found if f]


def test_every_reply_finding_reads_back_whole() -> None:
    seen: set[str] = set()
    for findings in _reply_findings():
        seen |= _check(_as_written(findings))
    assert {"garbled", "wrong_language", "unfinished", "loop", "stuck", "finish",
            "leak"} <= seen


@pytest.mark.parametrize("form", broken_servers.FORMS)
def test_a_cross_talk_finding_reads_back_whole(form: str) -> None:
    rng = random.Random(f"typed/{form}")
    codes = _codes(rng, 6)
    records = [_reply(i, code, f"Working on {code}.", 10.0 + i)
               for i, code in enumerate(codes[1:], start=1)]
    other = broken_servers.written(codes[2], form, rng)
    records.append(_reply(0, codes[0], f"Account {other} first, then {codes[0]}.", 10.0))
    rule = CrossTalk()
    for d in records:
        r = RequestRecord.read(d)
        rule.observe(r, own_verdicts(r))
    (revision,) = rule.revisions().values()
    assert _check(_as_written(revision.findings)) == {"cross_talk"}


def test_a_reference_mismatch_reads_back_whole() -> None:
    def rec(seq: int, phase: str, plan: str) -> dict[str, Any]:
        return {"seq": seq, "phase": phase, "item_id": "i", "body_hash": "b1",
                "reasoning": "Move it.", "content": "", "verdicts": ["ok"],
                "tool_calls": [{"function": {"name": "change_plan", "arguments":
                                             f'{{"account_id": "Q1RST1", "plan": "{plan}"}}'}}]}

    rule = ReferenceAgreement(ReferenceConfig(requests=1))
    for d in (rec(2, "reference", "pro"), rec(1, "measurement", "business")):
        r = RequestRecord.read(d)
        rule.observe(r, own_verdicts(r))
    (revision,) = rule.revisions().values()
    assert _check(_as_written(revision.findings)) == {"reference_mismatch"}


def test_a_finding_of_another_shape_is_left_out_and_the_rest_kept() -> None:
    typed = Findings.read({"leak": "content: '</think>'", "loop": "not an object",
                           "wrong_answer": [{"field": "content", "fact": "plan",
                                             "expected": "pro", "got": None}],
                           "from_another_tool": 1})
    assert typed.loop is None and typed.leak == "content: '</think>'"
    assert typed.wrong_answer[0].got is None
    assert Findings.read(None) == Findings() == Findings.read(["not", "a", "dict"])
