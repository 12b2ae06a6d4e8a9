"""An account nobody gave the request: a tool turn's reply that writes a code of its
own account's length that no fact of its request explains, anywhere (reasoning,
content, another argument of a call), is `wrong_answer`, whether the code is another
request's of the run (then `cross_talk`, at run level) or no request's at all (another
tenant's, an earlier run's, or made up).

Generated families: strangers in every place, at every length of code the workloads use;
honest replies that write their own code in every place beside numbers, dates, plan
names and names of standards (`SHA256`, `RFC822`) of the code's length.
"""

from __future__ import annotations

import random
import string
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadgen.expectations import Expectation, ExpectedCall
from loadgen.judge.reply.substance import find_wrong
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from tests.loadgen.judge.reply.test_judge_families import TOOL_TURNS, serve
from tests.support.broken_servers import _healthy, asked

OFFERED = {"get_account": ["account_id"], "change_plan": ["account_id", "plan"]}
PLACES = ("reasoning", "content", "note")
STANDARDS = ("SHA256", "AES128", "RFC822", "MD5", "ISO8601", "UTF8", "HTTP2", "X509",
             "RFC7231", "GPT4", "IPV6", "TLS13")


def mixed_code(rng: random.Random, length: int) -> str:
    """A made-up code: capitals and digits in turn more than once, as workloads make."""
    while True:
        code = "".join(rng.choice(string.ascii_uppercase + string.digits)
                       for _ in range(length))
        flips = sum(a.isdigit() != b.isdigit() for a, b in pairwise(code))
        if flips >= 2:
            return code


def record(account: str, *, reasoning: str, content: str = "",
           note: str | None = None) -> RequestRecord:
    args: dict[str, Any] = {"account_id": account, "plan": "enterprise"}
    if note is not None:
        args["note"] = note
    exp = Expectation(facts={"account_id": account, "plan": "enterprise"},
                      distinctive=("account_id",),
                      call=ExpectedCall("change_plan", {"account_id": "account_id",
                                                        "plan": "plan"}, ("get_account",)))
    return RequestRecord(
        run_id="r", scenario="s", phase="measurement", seq=0, endpoint="http://x",
        item_id="i", finish_reason="tool_calls", reasoning=reasoning, content=content,
        tool_calls=[{"id": "c", "type": "function", "function": {
            "name": "change_plan", "arguments": orjson.dumps(args).decode()}}],
        params={"tools": OFFERED, "expects_tool_call": True}, expected=exp.to_dict())


def with_stranger(seed: int, place: str, length: int) -> tuple[RequestRecord, str]:
    rng = random.Random(f"stranger/{seed}/{place}/{length}")
    account, stranger = mixed_code(rng, length), mixed_code(rng, length)
    text = f"Account {stranger} was checked too."
    return record(account, reasoning=(f"Move {account} now. {text}" if place == "reasoning"
                                      else f"Move {account} now."),
                  content=text if place == "content" else "",
                  note=text if place == "note" else None), stranger


def honest(seed: int, length: int) -> RequestRecord:
    rng = random.Random(f"honest/{seed}/{length}")
    account = mixed_code(rng, length)
    standard = rng.choice(STANDARDS)
    figures = (f"{rng.randint(2, 99_999):,} seats, renewal on 2026-0{rng.randint(1, 9)}-1"
               f"{rng.randint(0, 9)}, signed with {standard}, plan PRO or BUSINESS")
    return record(account, reasoning=f"The user wants {account} moved. {figures}.",
                  content=f"Moving {account.lower()} ({account}) to enterprise: {figures}.",
                  note=f"as asked for {account}; {standard}")


CASES = [(seed, place, length) for seed in range(40) for place in PLACES
         for length in (6, 8, 12)]


def test_a_code_nobody_gave_the_request_is_a_wrong_answer_wherever_it_is() -> None:
    missed = []
    for seed, place, length in CASES:
        r, stranger = with_stranger(seed, place, length)
        wrong = find_wrong(r)
        if not any(w.got == stranger for w in wrong) or \
                "wrong_answer" not in classify(r, VerdictConfig()):
            missed.append((seed, place, length))
    assert missed == [], f"{len(missed)} of {len(CASES)} strangers missed"


def test_honest_replies_with_their_own_code_figures_and_standards_are_ok() -> None:
    alarms = [(seed, length) for seed in range(120) for length in (6, 8, 12)
              if find_wrong(r := honest(seed, length)) or
              classify(r, VerdictConfig()) != ["ok"]]
    assert alarms == []


def test_a_call_found_wrong_is_judged_once() -> None:
    r = record("K7Q2ZD", reasoning="Move it.")
    r.tool_calls[0]["function"]["arguments"] = orjson.dumps(
        {"account_id": "B4D2XQ", "plan": "enterprise"}).decode()
    assert [w.field for w in find_wrong(r)] == ["call 0 change_plan.account_id"]


def stranger_server(seed: int = 0) -> Any:
    rng = random.Random(f"served/{seed}")

    def script(body: dict[str, Any], fake: Any) -> dict[str, Any]:
        mine = asked(body)
        return _healthy(mine, f"The user wants {mine.account} moved to the {mine.plan} "
                              f"plan; account {mixed_code(rng, 6)} is on file as well.")
    return script


@pytest.mark.parametrize("strangers", [True, False])
def test_served_accounts_of_no_request_fail_the_gate(fake_server, tmp_path: Path,
                                                     strangers: bool) -> None:
    script = stranger_server() if strangers else (
        lambda body, fake: _healthy(asked(body)))
    code, summary = serve(fake_server, tmp_path, script, TOOL_TURNS)
    verdicts = summary["phases"]["measurement"]["verdicts"]
    if strangers:
        assert code == 1, summary["gate"]["reasons"]
        assert verdicts.get("wrong_answer", 0) == 12, verdicts
    else:
        assert code == 0, summary["gate"]["reasons"]
