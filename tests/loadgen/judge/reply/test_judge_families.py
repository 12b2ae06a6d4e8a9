"""The judge on families it was not tuned on, both ways, through its public entry points.

Broken families (tests/support/broken_text.py, broken_servers.py) are generated with
varied values, lengths, languages and places; honest ones (honest_requests.py, and the
translated passages of tests/fixtures/honest_text in 18 languages and 10 scripts) with
their own requests. Each family is judged by the classifier reply by reply, and served
end to end: a broken server must fail its gate (exit 1), an honest one pass (exit 0).
What each family scores, and what it scored before the judge knew of it:
docs/testing.md (`python benchmarks/judge_families.py`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from loadgen.judge.run_level import own_verdicts
from loadgen.judge.run_level.cross_talk import CrossTalk
from loadgen.judge.text.scripts import request_scripts
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from loadgen.taxonomy import DEFAULT_FAIL_ON
from tests.loadgen.conftest import run_cli
from tests.support import broken_servers, broken_text
from tests.support.honest_requests import FAMILIES, Case, honest_cases, judged
from tests.support.scenario_files import write_scenario

GATED = {v.value for v in DEFAULT_FAIL_ON}
PLACES = ("reasoning", "content", "argument")


def record(text: str, place: str, params: dict[str, Any] | None = None,
           finish: str = "stop") -> RequestRecord:
    """A reply with `text` in one place: the reasoning of a tool call, an answer, or a
    tool call's argument value."""
    fields: dict[str, Any] = {"reasoning": "Answer the question.", "content": ""}
    calls: list[dict[str, Any]] = []
    if place == "reasoning":
        fields["reasoning"] = text
        calls = [broken_servers._call("change_plan", account_id="XEHM4B", plan="business")]
        finish = "tool_calls"
    elif place == "content":
        fields["content"] = text
    else:
        calls = [broken_servers._call("send_email", account_id="XEHM4B", subject="Update",
                                      body=text)]
        finish = "tool_calls"
    rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                        endpoint="http://x", item_id="i", params=params or {},
                        finish_reason=finish, tool_calls=calls, **fields)
    rec.verdicts = classify(rec, VerdictConfig())
    return rec


# --------------------------------------------------------------- salad, reply by reply

#: Replies caught of 72 (24 seeds x lengths 20, 40, 80 words) in each place, at least:
#: what docs/testing.md states, less a margin for nothing (the families are seeded).
CAUGHT = {"real_words_shuffled": 38, "words_with_foreign_words": 54,
          "latin_subword_soup": 64, "under_thresholds": 68}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("family", sorted(broken_text.TEXT_FAMILIES))
def test_token_salad_of_every_family_is_garbled(family: str, place: str) -> None:
    make = broken_text.TEXT_FAMILIES[family]
    caught = [seed for seed in range(24) for words in (20, 40, 80)
              if "garbled" in record(make(seed, words), place).verdicts]
    assert len(caught) >= CAUGHT[family], (family, place, len(caught))


def test_the_salad_families_are_varied() -> None:
    for family, make in broken_text.TEXT_FAMILIES.items():
        texts = {make(seed, 40) for seed in range(24)}
        assert len(texts) == 24, family
        assert len({len(t) for t in texts}) >= 12, family


# ---------------------------------------------- prose that is fluent and still wrong

ENGLISH = {"languages": ["en"]}


@pytest.mark.parametrize(("family", "verdict", "least"), [
    ("other_language", "wrong_language", 18), ("cut_mid_sentence", "unfinished", 18)])
def test_answers_in_another_language_or_cut_mid_sentence_fail(family: str, verdict: str,
                                                              least: int) -> None:
    make = getattr(broken_text, family)
    found = [record(make(seed, words), "content", ENGLISH).verdicts
             for seed in range(30) for words in (20, 40, 80)]
    assert sum(verdict in v for v in found) >= least
    assert all(set(v) <= GATED | {"ok"} for v in found)


def test_a_fluent_ramble_to_max_tokens_is_gated() -> None:
    for seed in range(20):
        assert record(broken_text.ramble(seed, 80), "content", ENGLISH,
                      finish="length").verdicts == ["truncated"]
    assert "truncated" in GATED


def test_the_language_a_request_names_is_allowed() -> None:
    french = broken_text.honest_passages()["fr"][0]
    for request in ("Translate the notice into French.", "Réponds en français."):
        params = Case("x", request).params
        assert record(french, "content", params).verdicts == ["ok"]
    assert record(french, "content", Case("x", "Summarize the notice.").params).verdicts \
        == ["wrong_language"]


# --------------------------------------------------- codes written otherwise, run level

def _reply(seq: int, own: str, reasoning: str, sent: float) -> dict[str, Any]:
    return {"seq": seq, "phase": "measurement", "item_id": f"item/{own}",
            "timings": {"sent": sent, "end": 1.0}, "verdicts": ["ok"], "reasoning": reasoning,
            "content": "", "tool_calls": [],
            "expected": {"facts": {"account_id": own}, "distinctive": ["account_id"]}}


def _codes(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        code = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6))
        if any(c.isdigit() for c in code) and any(c.isalpha() for c in code) and code not in out:
            out.append(code)
    return out


@pytest.mark.parametrize("form", broken_servers.FORMS)
def test_another_requests_code_is_found_however_it_is_written(form: str) -> None:
    rng = random.Random(f"codes/{form}")
    caught = 0
    for trial in range(40):
        codes = _codes(rng, 8)
        stale = trial % 2 == 0  # the source long finished: sent an hour before
        records = [_reply(i, code, f"Working on {code}.", 3600.0 * (not stale) + i)
                   for i, code in enumerate(codes[1:], start=1)]
        other = broken_servers.written(codes[1 + trial % 7], form, rng)
        records.append(_reply(0, codes[0], f"Account {other} first, then {codes[0]}.", 3600.0))
        rule = CrossTalk()
        for d in records:
            r = RequestRecord.read(d)
            rule.observe(r, own_verdicts(r))
        caught += 0 in rule.revisions()
    assert caught == 40


def test_honest_numbers_dates_and_the_own_code_written_otherwise_are_no_cross_talk() -> None:
    rng = random.Random("honest-codes")
    for _ in range(60):
        codes = _codes(rng, 16)
        records = [_reply(i, code, f"Working on {code}.", float(i))
                   for i, code in enumerate(codes[1:], start=1)]
        own = codes[0]
        own_form = broken_servers.written(own, rng.choice(broken_servers.FORMS), rng)
        text = (f"Account {own_form} renews on 2026-{rng.randint(1, 12):02d}-"
                f"{rng.randint(1, 28):02d}, invoice {rng.randint(100000, 999999)} for "
                f"{rng.randint(1, 9999)}.{rng.randint(0, 99):02d} dollars, "
                f"{rng.randint(2, 90)} seats, order {rng.randint(10, 99)}-"
                f"{rng.randint(1000, 9999)}.")
        records.append(_reply(0, own, text, 0.0))
        rule = CrossTalk()
        for d in records:
            r = RequestRecord.read(d)
            rule.observe(r, own_verdicts(r))
        assert rule.revisions() == {}, text


# -------------------------------------------------------------------------- honest

def test_every_honest_family_gets_no_gated_verdict() -> None:
    flagged = {case.name: (rec.verdicts, rec.findings) for case in honest_cases()
               if (rec := judged(case)).verdicts != ["ok"]}
    assert flagged == {}
    assert len(FAMILIES) >= 9 and len(honest_cases()) >= 9 * 16


HONEST = json.loads(broken_text.HONEST_TEXT.read_text())


def test_the_honest_text_is_in_eighteen_languages_and_ten_scripts() -> None:
    assert len(HONEST) >= 18 and len({entry["script"] for entry in HONEST.values()}) >= 10
    assert all(len(entry["passages"]) >= 20 for entry in HONEST.values())


@pytest.mark.parametrize("lang", sorted(HONEST))
def test_honest_text_in_every_language_is_ok(lang: str) -> None:
    flagged = {}
    for i, passage in enumerate(p["text"] for p in HONEST[lang]["passages"]):
        # The request is written in the passage's language: the passage itself (quoted
        # back to be summarized, say); the passage is the answer, then the reasoning.
        params = Case(f"{lang} {i}", passage).params
        assert request_scripts([{"role": "user", "content": passage}]) or \
            HONEST[lang]["script"] == "Latin"
        for place in ("content", "reasoning") if i % 4 == 0 else ("content",):
            rec = record(passage, place, params)
            if rec.verdicts != ["ok"]:
                flagged[f"{lang} {i} {place}"] = (rec.verdicts, rec.findings)
    assert flagged == {}


# -------------------------------------------------------------- served end to end

TOOL_TURNS = {"load": {"priming": 4, "measurement": 12}, "request": {"max_tokens": 400},
              "workload": {"variant": "per-request", "accounts": 24},
              "gate": {"prove_below": 0.3}}
PROSE = {"load": {"measurement": 12}, "request": {"max_tokens": 200},
         "workload": {"kind": "long-context", "context_tokens": [64, 128], "tools": False},
         "gate": {"prove_below": 0.3}}


def serve(fake_server, tmp_path: Path, script: Any, *scenario: dict[str, Any]
          ) -> tuple[int, dict]:
    fake, srv = fake_server(("scripted",))
    fake.script = script
    sc = write_scenario(tmp_path / "s.toml", *scenario)
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    summary = json.loads((out / "summary.json").read_text())
    return proc.returncode, summary


@pytest.mark.parametrize("name", sorted(broken_servers.BROKEN))
def test_a_server_built_to_fool_the_gate_fails_it(fake_server, tmp_path: Path,
                                                  name: str) -> None:
    code, summary = serve(fake_server, tmp_path, broken_servers.BROKEN[name], TOOL_TURNS)
    assert code == 1, summary["gate"]["reasons"]
    assert summary["gate"]["failures"] > 0


@pytest.mark.parametrize("name", sorted(broken_servers.BROKEN_PROSE))
def test_a_server_answering_in_broken_prose_fails(fake_server, tmp_path: Path,
                                                  name: str) -> None:
    code, summary = serve(fake_server, tmp_path, broken_servers.BROKEN_PROSE[name], PROSE)
    assert code == 1, (summary["gate"]["reasons"], summary["phases"]["measurement"])


def test_a_gate_written_before_a_verdict_existed_still_gates_it(fake_server,
                                                               tmp_path: Path) -> None:
    # fail_on as scenarios listed it before cross_talk existed: every reply carries
    # another account, and the gate fails on it all the same.
    old = {"gate": {"fail_on": ["stuck_in_reasoning", "empty_content", "no_tool_call"]}}
    code, summary = serve(fake_server, tmp_path, broken_servers.BROKEN["cross_talk_case"],
                          TOOL_TURNS, old)
    assert code == 1
    assert summary["phases"]["measurement"]["verdicts"].get("cross_talk", 0) >= 8
    assert "cross_talk" in summary["gate"]["fail_on"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_honest_server_built_to_trip_the_gate_passes(fake_server, tmp_path: Path,
                                                        family: str) -> None:
    cases = [FAMILIES[family](seed) for seed in range(6)]
    replay = broken_servers.honest_replay(tmp_path / "bodies.jsonl", cases)
    scenario = {"load": {"concurrency": 3, "measurement": len(cases)},
                "request": {"max_tokens": 4096},
                "workload": {"kind": "replay", "path": str(replay)}, "gate": {"prove_below": 0.5}}
    code, summary = serve(fake_server, tmp_path, broken_servers.replay_script(cases), scenario)
    assert code == 0, (summary["phases"]["measurement"]["verdicts"], summary["gate"]["reasons"])
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": len(cases)}
