"""Replies a healthy model gives that a careless rule would call broken.

Each entry is one reply (reasoning, content, tool calls, finish) and what its request
offered. None of them may get a gated verdict: long answers, templated lists and
tables, code, JSON, CSV, long reasoning that ends and answers, single and parallel
tool calls, a reply in Chinese. The rules are tuned against this corpus, not the
other way round: a rule that flags one of these is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import langcodes

from loadgen.bench.prose import LONG_ANSWER, LONG_REASONING
from loadgen.judge.text.language import language_of
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

OFFERED = {"get_account": ["account_id"], "change_plan": ["account_id", "plan"],
           "cancel_subscription": ["account_id", "effective"],
           "send_email": ["account_id", "subject", "body"]}


@dataclass(frozen=True)
class LegitReply:
    name: str
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    expects_tool_call: bool = False

    @property
    def params(self) -> dict[str, Any]:
        return {"tools": OFFERED if self.tool_calls or self.expects_tool_call else None,
                "tool_choice": "required" if self.expects_tool_call else None,
                "expects_tool_call": self.expects_tool_call}


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": f"call-{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}



ACCOUNTS = [f"{chr(65 + i % 26)}{(i * 7919) % 10000:04d}Z" for i in range(24)]

TABLE = "\n".join(
    ["| account | plan | seats | status | renews |", "|---|---|---:|---|---|"]
    + [f"| {a} | {'pro' if i % 3 else 'business'} | {12 + i % 5} | active | 2026-12-01 |"
       for i, a in enumerate(ACCOUNTS)])

TEMPLATED_LIST = "Accounts on the pro plan:\n" + "\n".join(
    f"- Account {a}: plan pro, 12 seats, active, renews 2026-12-01" for a in ACCOUNTS)

NUMBERED_STEPS = "\n".join(f"{i}. {step}" for i, step in enumerate([
    "Check that the account exists and is active.",
    "Read the current plan and the number of seats.",
    "Compare the usage of the last three months with the business tier's limits.",
    "Confirm with the owner that the upgrade is wanted.",
    "Apply the plan change and note the time it took effect.",
    "Prorate the charge for the rest of the billing period.",
    "Send the confirmation email to the account owner.",
    "Record the change in the audit log with the operator's name.",
    "Schedule the cancellation for the end of the term if requested.",
    "Verify that the invoice shows both the upgrade and the cancellation.",
    "Close the ticket and link the audit entry.",
], start=1))

CODE = '''Here are the tests:

```python
import pytest

from billing import change_plan, cancel_subscription


@pytest.mark.parametrize("plan", ["free", "pro", "business", "enterprise"])
def test_change_plan_accepts_every_plan(plan):
    account = change_plan("XEHM4B", plan)
    assert account.plan == plan


def test_change_plan_rejects_an_unknown_plan():
    with pytest.raises(ValueError):
        change_plan("XEHM4B", "platinum")


def test_cancel_at_the_end_of_the_term_keeps_the_account_active():
    account = cancel_subscription("XEHM4B", effective="end_of_term")
    assert account.status == "active"
    assert account.cancels_on == account.renews_on


def test_cancel_immediately_closes_the_account():
    account = cancel_subscription("XEHM4B", effective="immediately")
    assert account.status == "cancelled"
```
'''

JSON_ANSWER = json.dumps([{"account_id": a, "plan": "pro", "seats": 12, "status": "active"}
                          for a in ACCOUNTS], indent=2)

CSV_ANSWER = "month,prompt_tokens,generation_tokens,requests\n" + "\n".join(
    f"2026-{m:02d},{1_000_000 + 37_311 * m},{200_000 + 9_127 * m},{4_000 + 131 * m}"
    for m in range(1, 13))


CHINESE = ("已将账户 XEHM4B 升级到企业版（business）。取消订阅需要您确认生效时间："
           "立即取消，还是在本计费周期结束时取消？确认后我再执行下一步。")

CORPUS: list[LegitReply] = [
    LegitReply("long answer", content=LONG_ANSWER, reasoning="The user wants an overview."),
    LegitReply("markdown table", content=TABLE),
    LegitReply("templated list", content=TEMPLATED_LIST),
    LegitReply("numbered steps", content=NUMBERED_STEPS),
    LegitReply("code", content=CODE, reasoning="Write the tests they asked for."),
    LegitReply("json", content=JSON_ANSWER),
    LegitReply("csv", content=CSV_ANSWER),
    LegitReply("long reasoning, then an answer", reasoning=LONG_REASONING,
               content="I will upgrade XEHM4B to business first. Should the cancellation "
                       "take effect immediately or at the end of the term?"),
    LegitReply("chinese answer", content=CHINESE, reasoning="用户要求先升级再取消。"),
    LegitReply("long reasoning, then a tool call", reasoning=LONG_REASONING,
               tool_calls=[_call("change_plan", account_id="XEHM4B", plan="business")],
               finish_reason="tool_calls", expects_tool_call=True),
    LegitReply("parallel tool calls", reasoning="Look it up, then upgrade.",
               tool_calls=[_call("get_account", account_id="XEHM4B"),
                           _call("change_plan", account_id="XEHM4B", plan="business")],
               finish_reason="tool_calls", expects_tool_call=True),
    LegitReply("tool call with an optional key", content="Cancelling at the end of the term.",
               tool_calls=[_call("cancel_subscription", account_id="XEHM4B",
                                 effective="end_of_term", reason="moving to another vendor")],
               finish_reason="tool_calls", expects_tool_call=True),
    LegitReply("email with a long body", tool_calls=[_call(
        "send_email", account_id="XEHM4B", subject="Your plan change",
        body=LONG_ANSWER[:3000])], finish_reason="tool_calls", expects_tool_call=True),
]


@dataclass(frozen=True)
class AnsweredRequest(LegitReply):
    """A reply with the request it answers: what the request is written in and names,
    and what it asks to be repeated, are worked out from it as a run does."""

    request: str = ""

    @property
    def params(self) -> dict[str, Any]:
        from loadgen.judge.reply.request_profile import request_profile

        return {**super().params,
                **request_profile([{"role": "user", "content": self.request}])}


def answered_requests(members: int = 12) -> list[LegitReply]:
    """The honest shapes a reviewer built to trip the judge (`honest_requests`) and the
    translated passages of tests/fixtures/honest_text (18 languages, 10 scripts), each with
    its own request."""
    from tests.support.broken_text import HONEST_TEXT
    from tests.support.honest_requests import FAMILIES

    out: list[LegitReply] = []
    for family, make in FAMILIES.items():
        for seed in range(members):
            case = make(seed)
            out.append(AnsweredRequest(f"{family} ({case.name})", case.content, case.reasoning,
                                       case.tool_calls, case.finish_reason,
                                       request=case.request))
    for lang, entry in json.loads(HONEST_TEXT.read_text()).items():
        for i, passage in enumerate(p["text"] for p in entry["passages"][:members]):
            out.append(AnsweredRequest(f"honest_text_{entry['script'].lower()} ({lang} {i})",
                                       passage, request=passage))
    return out


def grown_corpus(members: int = 20) -> list[LegitReply]:
    """Every honest reply the rules are held to: the fixed examples above, the language and
    format families (`legit_families`), the shapes that repeat themselves
    (`honest_shapes`), and the answered requests (`answered_requests`), each family
    generated with varied values."""
    from tests.support.honest_shapes import honest_replies
    from tests.support.legit_families import family_replies

    return [*CORPUS, *family_replies(members), *honest_replies(),
            *answered_requests(min(members, 12))]


def sample_by_family(replies: list[LegitReply], per_family: int) -> list[LegitReply]:
    """The first `per_family` replies of each family (named `<family> ...`)."""
    taken: dict[str, int] = {}
    out = []
    for reply in replies:
        family = reply.name.split(" (")[0]
        if taken.get(family, 0) < per_family:
            taken[family] = taken.get(family, 0) + 1
            out.append(reply)
    return out


#: What a request in Russian says, for replies that answer one (`params["scripts"]`).
RUSSIAN_REQUEST = "Ответь, пожалуйста, по-русски: что с моим тарифом?"


def replay_line(reply: LegitReply, tag: str, mode: str = "replay_verbatim") -> bytes:
    """One replay body that makes the fake server stream `reply` (layout kept), offering
    what the reply needs (the billing tools; a request in the reply's scripts)."""
    user = f"{tag}: {reply.name}"
    if isinstance(reply, AnsweredRequest):
        user = reply.request
    elif reply.params.get("scripts"):
        user += " " + RUSSIAN_REQUEST
    # An honest reply answers in the request's language: a request answered in French
    # asks for French.
    answer = language_of(reply.content) if len(reply.content.split()) >= 12 else None
    if answer and answer != "en" and not isinstance(reply, AnsweredRequest):
        user += f" Please answer in {langcodes.Language.get(answer).display_name()}."
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": user}], "fake_mode": mode,
        "fake_reply": {"reasoning": reply.reasoning, "content": reply.content,
                       "tool_calls": reply.tool_calls, "finish_reason": reply.finish_reason}}
    if reply.params["tools"]:
        body["tools"] = [{"type": "function", "function": {
            "name": name, "parameters": {"type": "object", "required": required}}}
            for name, required in OFFERED.items()]
        body["tool_choice"] = reply.params["tool_choice"] or "auto"
    return json.dumps(body, ensure_ascii=False).encode()


def write_replay(path: Path, replies: list[LegitReply], tag: str) -> Path:
    """A replay file of `replies` (see `replay_line`)."""
    path.write_bytes(b"\n".join(replay_line(r, tag) for r in replies) + b"\n")
    return path


def judged(reply: LegitReply) -> RequestRecord:
    """The reply as a record, classified by today's rules (verdicts and findings set)."""
    record = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                           endpoint="http://x", item_id="i", params=reply.params,
                           finish_reason=reply.finish_reason, reasoning=reply.reasoning,
                           content=reply.content, tool_calls=reply.tool_calls)
    record.verdicts = classify(record, VerdictConfig())
    return record
