"""Servers built to fool a candidate gate, and honest ones built to trip it, as scripts
of the fake server (`FakeOpenAI.script`): each writes every reply from the request it
answers and what the server saw before it, with values varied by a seed.

Broken (each must fail, exit 1):
- cross_talk_<form>: the right call on the request's own account, and another request's
  account in the reasoning, written in another case, with separators, with look-alike
  letters, or in part; from a request in flight or one long finished (a stale slot);
- unrequested_call: the right call and a cancellation nobody asked for yet;
- salad_<family>: the right call, with token salad of one generated family
  (`broken_text`) in the reasoning;
- other_language / cut_mid_sentence / ramble: an answer in prose (the long-context
  workload without tools) in another language, cut mid-sentence with `stop`, or running
  to max_tokens.

Honest (each must pass, exit 0): the `honest_requests` families, replayed with their own
requests (`honest_replay`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import broken_text
from tests.support.honest_requests import Case
from tests.support.openai_fake import Asked, FakeOpenAI, asked

Script = Callable[[dict[str, Any], FakeOpenAI], dict[str, Any]]

#: Look-alike letters of other scripts (Cyrillic, Greek, fullwidth) for Latin ones.
LOOK_ALIKE = {"A": "А", "B": "В", "C": "С", "E": "Е", "H": "Н", "K": "К", "M": "М",
              "O": "О", "P": "Р", "T": "Т", "X": "Х", "Y": "У", "Z": "Ζ", "I": "І",
              "N": "Ν", "0": "０", "1": "１", "2": "２", "3": "３"}


def written(code: str, form: str, rng: random.Random) -> str:
    """A code as a reply that read it from another request's context may write it."""
    if form == "case":
        return rng.choice((code.lower(), code.title(), code.swapcase()))
    if form == "separators":
        sep = rng.choice(("-", " ", ".", "_", " - "))
        if rng.random() < 0.5:
            return sep.join(code)
        cut = rng.randint(2, len(code) - 2)
        return code[:cut] + sep + code[cut:]
    if form == "look_alike":
        letters = [c for c in code if c in LOOK_ALIKE]
        swap = set(rng.sample(letters, max(1, min(len(letters), rng.randint(1, 3)))))
        return "".join(LOOK_ALIKE[c] if c in swap else c for c in code)
    if form == "part":  # one character dropped at an end, the digits kept
        parts = [p for p in (code[1:], code[:-1]) if any(ch.isdigit() for ch in p)]
        return rng.choice(parts)
    return code


FORMS = ("case", "separators", "look_alike", "part")


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": f"call-{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def _healthy(ask: Asked, reasoning: str = "") -> dict[str, Any]:
    reasoning = reasoning or (f"The user wants account {ask.account} moved to the {ask.plan} "
                              "plan now, and the cancellation later.")
    return {"reasoning": reasoning,
            "tool_calls": [_call("change_plan", account_id=ask.account, plan=ask.plan)],
            "finish_reason": "tool_calls"}


def cross_talk(form: str, stale: bool, seed: int = 0) -> Script:
    rng = random.Random(f"cross_talk/{form}/{stale}/{seed}")

    def script(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
        mine = asked(body)
        others = [a for a in fake.seen if a.account != mine.account]
        if not others:
            return _healthy(mine)
        source = others[0] if stale else others[-1]
        other = written(source.account, form, rng)
        return _healthy(mine, f"Account {other} and account {mine.account} look alike; the "
                              f"user wants {mine.account} moved to the {mine.plan} plan now.")

    return script


def unrequested_call(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
    ask = asked(body)
    reply = _healthy(ask)
    reply["tool_calls"].append(_call("cancel_subscription", account_id=ask.account,
                                     effective="immediately"))
    return reply


def salad(family: str) -> Script:
    make = broken_text.TEXT_FAMILIES[family]

    def script(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
        return _healthy(asked(body), make(len(fake.seen), 60))

    return script


def _answer(body: dict[str, Any], text: str, finish: str = "stop") -> dict[str, Any]:
    return {"reasoning": "State the facts, then summarize.", "content": text,
            "finish_reason": finish}


def _facts(body: dict[str, Any]) -> str:
    codes = asked(body).codes
    return (f"The account id is {codes[0]} and the contract number is {codes[1]}. "
            if len(codes) > 1 else "")


def other_language(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
    text = broken_text.other_language(len(fake.seen), 60)
    return _answer(body, _facts(body) + text)


def cut_mid_sentence(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
    return _answer(body, _facts(body) + broken_text.cut_mid_sentence(len(fake.seen), 40))


def ramble(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
    return _answer(body, _facts(body) + broken_text.ramble(len(fake.seen), 80), "length")


BROKEN: dict[str, Script] = {
    **{f"cross_talk_{form}": cross_talk(form, stale=False) for form in FORMS},
    "cross_talk_stale": cross_talk("case", stale=True),
    "unrequested_call": unrequested_call,
    **{f"salad_{family}": salad(family) for family in broken_text.TEXT_FAMILIES},
}
#: Broken answers in prose: served to the long-context workload without tools.
BROKEN_PROSE: dict[str, Script] = {"other_language": other_language,
                                   "cut_mid_sentence": cut_mid_sentence, "ramble": ramble}


def honest_replay(path: Path, cases: list[Case]) -> Path:
    """A replay file whose every body is a case's request, and names the reply the
    scripted fake streams back for it (`replay_script`)."""
    lines = [json.dumps({"messages": [{"role": "user", "content": case.request}],
                         "fake_case": case.name}, ensure_ascii=False) for case in cases]
    path.write_text("\n".join(lines) + "\n")
    return path


def replay_script(cases: list[Case]) -> Script:
    by_name = {case.name: case for case in cases}

    def script(body: dict[str, Any], fake: FakeOpenAI) -> dict[str, Any]:
        case = by_name[body["fake_case"]]
        return {"reasoning": case.reasoning, "content": case.content,
                "tool_calls": case.tool_calls, "finish_reason": case.finish_reason}

    return script
