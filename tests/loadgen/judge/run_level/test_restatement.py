"""Repetition by meaning (judge.reply.restatement): loops restated in other words, counted on,
an answer written three times or more, a paragraph with small edits, generated with varied topics,
values and lengths, caught in the reasoning and the content; honest replies that repeat
a shape with the request's values (rows, consecutive ids, running sums, code, lists, a
question restated once) pass, reply by reply and served end to end."""

from __future__ import annotations

import itertools
import time

import orjson
import pytest

from loadgen.judge.reply.restatement import (
    find_restatement,
    judge,
    request_numbers,
    screen,
    sentences,
)
from loadgen.judge.run_level import Revision
from loadgen.judge.run_level.restated import Restated
from loadgen.judge.text.visible import without_hidden
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from loadgen.taxonomy import DEFAULT_FAIL_ON
from tests.loadgen.judge.reply.test_judge_families import serve
from tests.support.family_sizes import SIZES, sample
from tests.support.restated import BROKEN, HONEST, RUNS_ON, Reply, answer_twice, broken_reply

CFG = VerdictConfig()
GATED = {v.value for v in DEFAULT_FAIL_ON}
SEEDS = range(12)


def judged(reply: Reply) -> RequestRecord:
    record = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                           endpoint="http://x", item_id=reply.name, params=reply.params,
                           finish_reason=reply.finish_reason, reasoning=reply.reasoning,
                           content=reply.content, tool_calls=reply.tool_calls)
    # As a run judges it: per reply as it completes, then the run-level pass (where
    # loops by meaning are found: `run_level.restated`).
    own = classify(record, CFG)
    rule = Restated(CFG)
    rule.observe(RequestRecord.read({**orjson.loads(record.to_json()), "verdicts": own}), own)
    record.verdicts = rule.revisions().get(0, Revision()).apply(own)
    return record


#: Caught of 12 seeds at each length, at least (docs/testing.md states the counts).
FLOORS = {("restatement", "length"): {2000: 5, 4000: 12, 8000: 12, 16000: 12},
          ("restatement", "stop"): {2000: 1, 4000: 11, 8000: 12, 16000: 12},
          ("stepped", "length"): {1000: 6, 2000: 12, 4000: 12, 8000: 12, 16000: 12},
          ("stepped", "stop"): {1000: 1, 2000: 8, 4000: 12, 8000: 12, 16000: 12},
          ("near_duplicate", "length"): {1000: 7, 2000: 12, 4000: 12, 8000: 12, 16000: 12},
          ("near_duplicate", "stop"): {1000: 9, 2000: 12, 4000: 12, 8000: 12, 16000: 12},
          ("answer_thrice", "stop"): {1000: 10, 2000: 5, 4000: 3, 8000: 6, 16000: 7}}


@pytest.mark.parametrize("place", ["reasoning", "content"])
@pytest.mark.parametrize("family,finish", sorted(FLOORS))
def test_a_loop_by_meaning_is_a_reasoning_loop(family: str, finish: str, place: str) -> None:
    for chars, least in FLOORS[family, finish].items():
        caught = [seed for seed in SEEDS if "reasoning_loop" in judged(
            broken_reply(family, seed, chars, place, finish)).verdicts]
        assert len(caught) >= least, (family, finish, place, chars, caught)


def test_the_verdict_is_the_same_in_every_process() -> None:
    # Word ids follow the text, never a set's order of strings (hash seeds differ).
    import os
    import subprocess
    import sys

    from tests.loadgen.conftest import REPO

    code = ("from tests.support.restated import BROKEN; from loadgen.scenario import "
            "VerdictConfig; from loadgen.judge.reply.restatement import find_restatement; "
            "print([find_restatement(BROKEN['answer_thrice'](s, 2000)[1], VerdictConfig(), "
            "cut=False, min_novelty=0.05) is not None for s in range(12)])")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, cwd=REPO,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in (1, 2, 3)}
    assert len(seen) == 1


def test_the_families_loop_as_they_say() -> None:
    assert set(BROKEN) >= RUNS_ON
    for family, make in BROKEN.items():
        texts = {make(seed, 4000)[1] for seed in SEEDS}
        assert len(texts) == len(SEEDS), family
        for text in texts:  # no verbatim repeat for the period rule: worded anew
            sentences = [s for s in text.split(". ") if len(s) > 20]
            if family in ("restatement", "stepped"):
                assert len(set(sentences)) > len(sentences) / 3, family


@pytest.mark.parametrize("family", sorted(HONEST))
def test_an_honest_reply_that_repeats_a_shape_passes(family: str) -> None:
    flagged = {}
    for chars in (500, 1000, 2000, 4000, 8000):
        for seed in SEEDS:
            record = judged(HONEST[family](seed, chars))
            if record.verdicts != ["ok"]:
                flagged[record.item_id] = (record.verdicts, record.findings)
    assert flagged == {}


def test_consecutive_ids_of_the_request_are_a_walk_not_a_counter() -> None:
    # The same reasoning without the request's values is a counter that steps: a loop.
    reply = HONEST["consecutive_ids"](0, 8000)
    assert judged(reply).verdicts == ["ok"]
    bare = Reply(reply.name, "Check the orders.", reasoning=reply.reasoning,
                 content=reply.content)
    assert "reasoning_loop" in judged(bare).verdicts


def test_the_request_values_are_its_numbers_and_codes() -> None:
    messages = [{"role": "user", "content": "Rows: id 4471, id 9912, 2026-01-05, $120.50."}]
    assert request_numbers(messages) == ["4471", "9912", "2026-01-05", "120.50"]
    many = [{"role": "user", "content": " ".join(str(i) for i in range(1000))}]
    assert len(request_numbers(many)) == 256


@pytest.mark.parametrize("kilobytes", [1, 8, 32])
def test_the_rule_costs_linear_time(kilobytes: int) -> None:
    chars = kilobytes * 1024
    texts = [BROKEN["restatement"](seed, chars)[1][:chars] for seed in range(3)]
    texts += [HONEST["table_rows"](seed, chars).content[:chars] for seed in range(3)]
    start = time.perf_counter()
    for text in texts:
        find_restatement(text, CFG, cut=True, min_novelty=0.1)
    per_reply = (time.perf_counter() - start) / len(texts)
    assert per_reply < 0.004 * kilobytes + 0.01  # measured ~1 ms per KB on two cores


@pytest.mark.parametrize("step", SIZES)
def test_the_screen_never_passes_over_a_loop_the_rule_catches(step: int) -> None:
    # The screen (a finished text needs six segments, `restate_ended_min_segments` for a
    # restatement, that end as sentences do; none without a sentence end) is sound: every
    # loop the unscreened rule catches in the families, ended or cut, gets past it.
    caught = 0
    for family, make in {**BROKEN, "answer_twice": answer_twice}.items():
        for chars in (1000, 2000, 4000, 8000, 16000):
            for seed in sample(SEEDS, step):
                text = make(seed, chars)[1]
                for cut, novelty in itertools.product((False, True), (0.05, 0.1)):
                    tail = text[-(16_000 if cut else CFG.restate_tail_chars):]
                    found = judge(sentences(without_hidden(tail)), CFG, cut=cut,
                                  min_novelty=novelty)
                    if found is not None:
                        caught += 1
                        assert screen(text, CFG, cut=cut) is not None, (family, seed, chars)
                    assert find_restatement(text, CFG, cut=cut, min_novelty=novelty) == found
    assert caught > 600 // step
    # Text with no sentence end, finished, is screened out; cut, it is read.
    words = " ".join(["again the same plan for account"] * 400)
    assert screen(words, CFG, cut=False) is None
    assert screen(words, CFG, cut=True) is not None


# -------------------------------------------------------------- served end to end

PROSE = {"load": {"measurement": 12}, "request": {"max_tokens": 400},
         "workload": {"kind": "long-context", "context_tokens": [64, 128], "tools": False},
         "gate": {"prove_below": 0.3}}


@pytest.mark.parametrize("family", ["answer_thrice", "restatement", "stepped"])
def test_a_server_that_loops_by_meaning_fails_the_gate(fake_server, tmp_path, family: str
                                                       ) -> None:
    def script(body: dict, fake: object) -> dict:
        seed = len(getattr(fake, "seen", []))
        text = BROKEN[family](seed % 6 + 3, 8000)[1]
        return {"reasoning": "Answer from the document.", "content": text,
                "finish_reason": "stop"}

    code, summary = serve(fake_server, tmp_path, script, PROSE)
    assert code == 1, summary["gate"]["reasons"]
    # Every reply also names facts the document does not hold (wrong_answer): the loop
    # verdict is counted on its own. An answer written again is caught in 6 of 12 at 8 KB.
    least = 4 if family == "answer_thrice" else 8
    assert summary["phases"]["measurement"]["verdicts"].get("reasoning_loop", 0) >= least


def test_an_honest_server_walking_the_request_passes(fake_server, tmp_path) -> None:
    from tests.support.broken_servers import honest_replay, replay_script
    from tests.support.honest_requests import Case

    cases = [Case(r.name, r.request, r.content, r.reasoning)
             for family in sorted(HONEST) for r in (HONEST[family](1, 4000),
                                                    HONEST[family](2, 2000))]
    replay = honest_replay(tmp_path / "bodies.jsonl", cases)
    scenario = {"load": {"concurrency": 3, "measurement": len(cases)},
                "request": {"max_tokens": 4096},
                "workload": {"kind": "replay", "path": str(replay)}, "gate": {"prove_below": 0.5}}
    code, summary = serve(fake_server, tmp_path, replay_script(cases), scenario)
    assert code == 0, (summary["phases"]["measurement"]["verdicts"], summary["gate"]["reasons"])
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": len(cases)}


def test_replies_alike_are_judged_once_and_as_each_alone() -> None:
    # One rule over a run: a reply written again word for word gets what the first got;
    # the same texts with other request values, or cut, are judged on their own.
    def read(seq: int, reply: Reply) -> RequestRecord:
        record = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=seq,
                               endpoint="http://x", item_id=reply.name, params=reply.params,
                               finish_reason=reply.finish_reason, reasoning=reply.reasoning,
                               content=reply.content, tool_calls=reply.tool_calls)
        return RequestRecord.read(orjson.loads(record.to_json()))

    walk = HONEST["consecutive_ids"](0, 8000)
    bare = Reply(walk.name, "Check the orders.", reasoning=walk.reasoning, content=walk.content)
    looping = broken_reply("stepped", 0, 4000, "reasoning", "stop")
    replies = [looping, looping, walk, bare, walk, bare]
    rule = Restated(CFG)
    for seq, reply in enumerate(replies):
        rule.observe(read(seq, reply), ["ok"])
    found = rule.revisions()
    alone = {seq for seq, reply in enumerate(replies) if judged(reply).verdicts != ["ok"]}
    assert set(found) == alone == {0, 1, 3, 5}
    assert found[0].findings == found[1].findings and found[3].findings == found[5].findings
