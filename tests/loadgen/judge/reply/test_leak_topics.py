"""Leaks decided by what the request is about, not by the token's neighbours.

Generated families, both ways. In an answer to a request about anything else (billing,
travel, cooking), a special token of any model's template (DeepSeek's, ChatML, Llama's
`</s>`, Gemma's turns, Mistral's `[INST]`) is a leak wherever it stands outside code,
spaced like a word or not; a role line written after the answer is an invented turn.
Honest replies keep their markup: answers to questions about templates and tokenizers,
HTML in code blocks, dialogues that were asked for. Served end to end as well.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from loadgen.judge.reply.request_profile import request_profile
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from tests.loadgen.conftest import run_cli
from tests.support.honest_requests import Case
from tests.support.scenario_files import write_scenario

TOKENS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<|im_end|>", "<|im_start|>",
          "<|endoftext|>", "<|eot_id|>", "</s>", "<s>", "<unk>", "<end_of_turn>",
          "<start_of_turn>", "[INST]", "[/INST]", "<</SYS>>", "</think>", "<eos>"]
REQUESTS = [
    "My invoice for March shows a double charge. Can you explain what happened?",
    "Which train should I take from Lyon to Geneva on Sunday morning?",
    "How long should I bake a 1.5 kg sourdough loaf, and at what temperature?",
    "Please summarise the refund policy for annual plans in two sentences.",
]
ANSWERS = [
    "The double charge came from a retried payment; the second one is refunded in 5 days, "
    "let me know if it does not arrive.",
    "Take the 08:12 TER from Lyon Part-Dieu; it reaches Geneva Cornavin at 10:05, with a "
    "few notes on luggage below.",
    "Bake it at 230 degrees for 20 minutes with the lid on, then 25 minutes without it.",
    "Annual plans are refunded in full within 30 days. After that, the unused months are "
    "credited to your account.",
]


def _placed(answer: str, token: str, where: str, rng: random.Random) -> str:
    words = answer.split(" ")
    if where == "start":
        return f"{token} {answer}"
    if where == "end":
        return f"{answer} {token}"
    if where == "own line":
        cut = rng.randrange(3, len(words) - 2)
        return " ".join(words[:cut]) + f"\n{token}\n" + " ".join(words[cut:])
    cut = rng.randrange(3, len(words) - 2)  # a word among words
    return " ".join([*words[:cut], token, *words[cut:]])


def _record(request: str, content: str, reasoning: str = "") -> RequestRecord:
    rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                        endpoint="http://x", item_id="i", status=200, finish_reason="stop",
                        params=request_profile([{"role": "user", "content": request}]),
                        content=content, reasoning=reasoning)
    rec.verdicts = classify(rec, VerdictConfig())
    return rec


def leaked_cases() -> list[Case]:
    rng = random.Random(5)
    cases = []
    for i, token in enumerate(TOKENS):
        for where in ("start", "middle", "end", "own line"):
            k = rng.randrange(len(REQUESTS))
            cases.append(Case(f"leak {i} {where}", REQUESTS[k],
                              _placed(ANSWERS[k], token, where, rng)))
    for i, role in enumerate(["User: thanks, that helps!", "Assistant: Anything else?",
                              "### User\nAnd the next one?", "**User:** great",
                              "用户：谢谢"]):
        k = i % len(REQUESTS)
        cases.append(Case(f"turn {i}", REQUESTS[k], f"{ANSWERS[k]}\n\n{role}"))
    return cases


def honest_cases() -> list[Case]:
    rng = random.Random(9)
    cases = []
    for i, token in enumerate(TOKENS):
        cases.append(Case(
            f"template {i}", f"In chat templates, what does the special token {token} do?",
            f"The token {token} marks a boundary of the prompt; the tokenizer adds it, and "
            f"a template writes it as {token} between turns."))
    for i in range(4):
        cases.append(Case(
            f"html {i}", "How do I show an old price struck through on my shop page?",
            f"Wrap it in an s element:\n\n```html\n<p><s>{rng.randrange(20, 90)} EUR</s> "
            f"{rng.randrange(10, 19)} EUR</p>\n```\n\nBrowsers draw a line through it."))
    for i, names in enumerate([("User", "Assistant"), ("Human", "Assistant")]):
        cases.append(Case(
            f"dialogue {i}", "Write a short dialogue between a customer and a support agent "
            "about a late parcel.",
            f"{names[0]}: My parcel is three days late.\n{names[1]}: I am sorry; it left "
            f"the depot this morning and arrives tomorrow.\n{names[0]}: Thank you!"))
    return cases


@pytest.mark.parametrize("case", leaked_cases(), ids=lambda c: c.name)
def test_markup_in_an_answer_about_something_else_is_a_leak(case: Case) -> None:
    rec = _record(case.request, case.content)
    assert "token_leak" in rec.verdicts, (case.content, rec.findings)


@pytest.mark.parametrize("case", honest_cases(), ids=lambda c: c.name)
def test_markup_an_honest_answer_was_asked_for_is_no_leak(case: Case) -> None:
    rec = _record(case.request, case.content)
    assert "token_leak" not in rec.verdicts, (case.content, rec.findings)


def test_the_request_profile_says_what_the_request_is_about() -> None:
    profile = request_profile([{"role": "user", "content": REQUESTS[0]}])
    assert profile["about_markup"] is False and profile["asks_dialogue"] is False
    assert request_profile([{"role": "user", "content": "Explain the Jinja chat template."}])[
        "about_markup"] is True
    assert request_profile([{"role": "user", "content": "Why does <|im_end|> show up?"}])[
        "about_markup"] is True
    assert request_profile([{"role": "user", "content": "Write a dialogue, please."}])[
        "asks_dialogue"] is True


def test_a_record_that_does_not_say_its_topic_is_judged_as_before() -> None:
    """Results written before the judge asked what a request is about keep their
    verdicts when rebuilt: markup is then judged by where it stands."""
    rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                        endpoint="http://x", item_id="i", status=200, finish_reason="stop",
                        content="It closes with </think> and then answers.")
    assert classify(rec, VerdictConfig()) == ["ok"]


def _serve(fake_server, tmp_path: Path, cases: list[Case]) -> tuple[int, dict[str, Any]]:
    from tests.support import broken_servers

    fake, srv = fake_server(("scripted",))
    fake.script = broken_servers.replay_script(cases)
    replay = broken_servers.honest_replay(tmp_path / "bodies.jsonl", cases)
    sc = write_scenario(tmp_path / "s.toml", load={"concurrency": 4, "priming": 0,
                                                   "measurement": len(cases)},
                        request={"max_tokens": 512},
                        workload={"kind": "replay", "path": str(replay)},
                        gate={"prove_below": 0.9})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    return proc.returncode, json.loads((out / "summary.json").read_text())


def test_a_server_leaking_markup_into_plain_answers_fails(fake_server, tmp_path: Path) -> None:
    cases = leaked_cases()[::3]
    code, summary = _serve(fake_server, tmp_path, cases)
    assert code == 1, summary["gate"]["reasons"]
    verdicts = summary["phases"]["measurement"]["verdicts"]
    assert verdicts.get("token_leak") == len(cases), verdicts


def test_an_honest_server_writing_asked_for_markup_passes(fake_server, tmp_path: Path) -> None:
    cases = honest_cases()
    code, summary = _serve(fake_server, tmp_path, cases)
    assert code == 0, (summary["phases"]["measurement"]["verdicts"], summary["gate"]["reasons"])
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": len(cases)}
