"""The stream as a sequence (`disordered_stream`, tool-call ids): generated families.

Broken families, each generated over many variants: a run of deltas sent again right
after itself, many deltas each sent twice, reasoning after the answer began (content
before it, or reasoning that resumes), the reasoning's opening repeated in the content,
a tool-call id in two requests' replies or twice in one, another request's deltas
interleaved. Honest families that must never trip: every reply of the legit corpus cut
into deltas the way token streams cut them (one token a delta, and one to four as
speculative decoding sends them), texts built of naturally repeated tokens, and the
recorded vLLM streams. Served end to end: the broken families fail the run, the honest
ones pass.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadgen.engine.sse import SSEParser
from loadgen.judge.reply.sequence import (
    MIN_ECHO_CHARS,
    MIN_REPLAY_CHARS,
    _words,
    sequence_problems,
    stream_facts,
)
from loadgen.judge.reply.tool_calls import random_part
from loadgen.records import RequestRecord
from tests.loadgen.conftest import run_cli
from tests.support.broken_servers import _call
from tests.support.legit_corpus import grown_corpus
from tests.support.openai_fake import HEALTHY_REASONING, asked
from tests.support.scenario_files import write_scenario
from tests.support.token_streams import deltas as cut
from tests.support.token_streams import tokens

VARIANTS = 200
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "vllm"
_REASONINGS = [
    "The user wants account {acc} moved to {plan}, and the request names no other account. "
    "Before I change anything I should check that {plan} is one of the plans offered; it "
    "is, so the call is change_plan with the account id and the plan. Nothing else was "
    "asked, and the tool returns the new plan, which I can confirm afterwards.",
    "Let me read the request again: account {acc}, new plan {plan}. The tool for that is "
    "change_plan; it takes the account id and the plan name. There is no reason to look "
    "the account up first, since the id is given in full and the plan exists. I will make "
    "exactly one call and then tell the user what changed.",
]


def _reasoning(rng: random.Random, acc: str = "XEHM4B", plan: str = "business") -> str:
    return rng.choice(_REASONINGS).format(acc=acc, plan=plan)


def _record(reasoning: list[str], content: list[str], late: int = 0) -> RequestRecord:
    rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                        endpoint="http://x", item_id="i", status=200, finish_reason="stop",
                        reasoning="".join(reasoning), content="".join(content))
    rec.sequence = stream_facts(reasoning, content, late)
    return rec


# -- broken families: (reasoning deltas, content deltas, late reasoning) ------------------

def _replayed(rng: random.Random) -> tuple[list[str], list[str], int]:
    """A run of 1 to 3 deltas (32 characters or more, words, not whole lines) sent again
    right after itself, in the reasoning or the content."""
    while True:
        d = cut(_reasoning(rng), rng, per_delta=rng.randint(3, 8))
        k = rng.randint(1, 3)
        i = rng.randrange(0, len(d) - k)
        unit = "".join(d[i:i + k])
        if len(unit.strip()) >= MIN_REPLAY_CHARS and len(_words(unit)) >= 3 and \
                "\n" not in unit:
            broken = d[:i + k] + d[i:i + k] + d[i + k:]
            return (broken, ["Done."], 0) if rng.random() < 0.5 else (["Plan it."], broken, 0)


def _doubled(rng: random.Random) -> tuple[list[str], list[str], int]:
    """Deltas each sent twice (the same SSE event again): one word delta in six or more,
    six different words at least."""
    d = cut(_reasoning(rng), rng, per_delta=1)
    wordy = [i for i, t in enumerate(d) if len(t.strip()) >= 3 and t.strip().isalpha()]
    picked: list[int] = []
    words: set[str] = set()
    for i in rng.sample(wordy, len(wordy)):
        if d[i].strip().lower() not in words and all(abs(i - j) > 1 for j in picked):
            picked.append(i)
            words.add(d[i].strip().lower())
        if len(picked) * 6 >= len(wordy):
            break
    out: list[str] = []
    for i, t in enumerate(d):
        out += [t, t] if i in picked else [t]
    return out, ["Done."], 0


def _late_reasoning(rng: random.Random) -> tuple[list[str], list[str], int]:
    """Reasoning deltas after visible content: content first, or reasoning resumed."""
    r = cut(_reasoning(rng), rng, per_delta=rng.randint(1, 4))
    late = rng.randint(1, len(r) // 2)
    return r, ["I will change the plan now."], late


def _opening_in_content(rng: random.Random) -> tuple[list[str], list[str], int]:
    """The reasoning streamed as content too: the content holds it, then the answer."""
    text = _reasoning(rng)
    r = cut(text, rng, per_delta=rng.randint(1, 4))
    start = rng.choice(["", "\n", "Answer: "])
    return r, cut(start + text + "\n\nThe plan is changed.", rng, per_delta=2), 0


BROKEN: dict[str, Callable[[random.Random], tuple[list[str], list[str], int]]] = {
    "run replayed": _replayed,
    "deltas doubled": _doubled,
    "reasoning after the answer": _late_reasoning,
    "reasoning opening in content": _opening_in_content,
}


@pytest.mark.parametrize("family", sorted(BROKEN))
def test_every_broken_variant_is_caught(family: str) -> None:
    missed = []
    for seed in range(VARIANTS):
        reasoning, content, late = BROKEN[family](random.Random(seed))
        if not sequence_problems(_record(reasoning, content, late)):
            missed.append(seed)
    assert missed == [], f"{family}: {len(missed)} of {VARIANTS} called clean"


# -- honest families ---------------------------------------------------------------------

def _natural_repeats(rng: random.Random) -> str:
    """Text whose tokens repeat as honest text's do."""
    parts = [
        "\n\n", "    ", "=" * rng.randint(3, 40), "\n" + "-" * rng.randint(2, 30) + "\n",
        "Ha" + " ha" * rng.randint(1, 6) + "! ", "I know that that is true. ",
        "blah " * rng.randint(2, 5), "no, no, no. ", "| --- | --- | --- |\n",
        "    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,\n" * rng.randint(1, 4),
        "We will, we will rock you, rock you every night\n" * rng.randint(2, 3),
        "        self.assertEqual(result.plan, 'business')\n" * rng.randint(1, 2),
        "had had enough. ", "very very ", "- [ ] write the migration plan today\n" * 2,
        "0 0 0 0 0 0 0 0\n" * rng.randint(2, 5), "\t\t", "...", "!!", "??",
    ]
    return "".join(rng.choice(parts) for _ in range(rng.randint(8, 30)))


def _honest_streams() -> list[tuple[str, list[str], list[str]]]:
    out = []
    rng = random.Random(7)
    for reply in grown_corpus(12):
        for per in (1, 2, 4):
            out.append((reply.name, cut(reply.reasoning, rng, per), cut(reply.content, rng, per)))
    for seed in range(VARIANTS):
        r = random.Random(seed)
        per = r.randint(1, 4)
        out.append((f"natural repeats {seed}", cut(_natural_repeats(r), r, per),
                    cut(_natural_repeats(r), r, per)))
        # An answer drafted at the end of the reasoning and then written out.
        answer = "Account XEHM4B is now on the business plan, effective today, as you asked."
        out.append((f"drafted answer {seed}", cut(_reasoning(r) + " Draft: " + answer, r, per),
                    cut(answer, r, per)))
        # Whitespace content before the reasoning is no answer yet.
        out.append((f"blank content first {seed}", cut(_reasoning(r), r, per), ["\n\n", "Done."]))
    return out


def test_honest_streams_never_trip() -> None:
    streams = _honest_streams()
    tripped = [(name, sequence_problems(_record(r, c)))
               for name, r, c in streams if sequence_problems(_record(r, c))]
    assert len(streams) > 1500
    assert tripped == [], f"{len(tripped)} of {len(streams)} honest streams tripped"


def _fixture_deltas(name: str) -> tuple[list[str], list[str], int]:
    parser = SSEParser()
    reasoning: list[str] = []
    content: list[str] = []
    late = 0
    for event in [*parser.feed((FIXTURES / name).read_bytes()), *parser.close()]:
        if event.data == b"[DONE]":
            continue
        obj = json.loads(event.data)
        for choice in obj.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("reasoning"):
                reasoning.append(delta["reasoning"])
                late += any(c.strip() for c in content)
            if delta.get("content"):
                content.append(delta["content"])
    return reasoning, content, late


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.sse")))
def test_recorded_vllm_streams_are_in_order(name: str) -> None:
    reasoning, content, late = _fixture_deltas(name)
    assert reasoning
    assert late == 0
    assert stream_facts(reasoning, content, late) is None


def test_tool_call_ids_with_a_random_part() -> None:
    rng = random.Random(3)
    for _ in range(VARIANTS):
        hexid = "".join(rng.choice("0123456789abcdef") for _ in range(32))
        assert random_part(f"chatcmpl-tool-{hexid}", "change_plan")
        base62 = "".join(rng.choice("abcXYZ0123456789") for _ in range(24))
        if any(c.isdigit() for c in base62) and any(c.isalpha() for c in base62):
            assert random_part(f"call_{base62}", "get_account")
    # Ids a parser writes from the name and the position: the same in every reply.
    for name in ("change_plan", "base64encode", "sha256sum", "get_v2_account"):
        for index in range(4):
            assert not random_part(f"functions.{name}:{index}", name)
            assert not random_part(f"call_{index}", name)
            assert not random_part(f"{name}-{index}", name)


# -- served end to end -------------------------------------------------------------------

MEASURED = 12


def _serve(fake_server, tmp_path: Path, script: Any,
           workload: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    fake, srv = fake_server(("scripted",))
    fake.script = script
    sc = write_scenario(tmp_path / "s.toml", load={"concurrency": 4, "priming": 0,
                                                   "measurement": MEASURED},
                        request={"max_tokens": 4000},
                        workload={"kind": "tool-turn", **(workload or {})},
                        gate={"prove_below": 0.5})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    return proc.returncode, json.loads((out / "summary.json").read_text())


def _stream_script(family: str | None, seed: int) -> Any:
    rng = random.Random(seed)

    def script(body: dict[str, Any], fake: Any) -> dict[str, Any]:
        ask = asked(body)
        call = _call("change_plan", account_id=ask.codes[0], plan=ask.plan)
        text = _reasoning(rng, ask.codes[0], ask.plan)
        if family is None:  # honest: tokens repeated as honest streams repeat them
            d = [("content", "\n\n")] + [("reasoning", t) for t in cut(
                text + "\n\n" + "=" * 12 + "\n" + "- check the plan\n- check the plan\n",
                rng, rng.randint(1, 4))]
            return {"deltas": d, "tool_calls": [call], "finish_reason": "tool_calls"}
        reasoning, content, late = BROKEN[family](rng)
        reasoning = [t.replace("XEHM4B", ask.codes[0]) for t in reasoning]
        d = [("reasoning", t) for t in reasoning]
        if late:  # the answer began, then the reasoning resumed
            d = d[:-late] + [("content", c) for c in content] + d[-late:]
        else:
            d += [("content", c.replace("XEHM4B", ask.codes[0])) for c in content]
        return {"deltas": d, "tool_calls": [call], "finish_reason": "tool_calls"}

    return script


@pytest.mark.parametrize("family", sorted(BROKEN))
def test_a_disordered_stream_fails_the_run(fake_server, tmp_path: Path, family: str) -> None:
    code, summary = _serve(fake_server, tmp_path, _stream_script(family, 11))
    verdicts = summary["phases"]["measurement"]["verdicts"]
    assert code == 1, summary["gate"]["reasons"]
    assert verdicts.get("disordered_stream") == MEASURED, verdicts


def test_an_honest_stream_with_repeated_tokens_passes(fake_server, tmp_path: Path) -> None:
    code, summary = _serve(fake_server, tmp_path, _stream_script(None, 12))
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": MEASURED}, summary["gate"]
    assert code == 0


def _ids_script(how: str, seed: int) -> Any:
    rng = random.Random(seed)
    shared = f"chatcmpl-tool-{rng.getrandbits(128):032x}"

    def script(body: dict[str, Any], fake: Any) -> dict[str, Any]:
        ask = asked(body)
        call = _call("change_plan", account_id=ask.codes[0], plan=ask.plan)
        reasoning = HEALTHY_REASONING.format(acc=ask.codes[0], plan=ask.plan)
        if how == "across requests":  # one id (or one of a few) handed to every reply
            ids = [shared if rng.random() < 0.5 else shared[:-4] + "beef"]
            return {"reasoning": reasoning, "tool_calls": [call], "call_ids": ids,
                    "finish_reason": "tool_calls"}
        own = f"call_{rng.getrandbits(96):024x}"  # twice in one reply
        return {"reasoning": reasoning, "tool_calls": [call, call], "call_ids": [own, own],
                "finish_reason": "tool_calls"}

    return script


@pytest.mark.parametrize("how,verdict", [("across requests", "cross_talk"),
                                         ("within a reply", "bad_tool_call")])
def test_a_reused_tool_call_id_fails_the_run(fake_server, tmp_path: Path, how: str,
                                             verdict: str) -> None:
    code, summary = _serve(fake_server, tmp_path, _ids_script(how, 5))
    assert code == 1, summary["gate"]["reasons"]
    assert summary["phases"]["measurement"]["verdicts"].get(verdict) == MEASURED, \
        summary["phases"]["measurement"]["verdicts"]


@pytest.mark.parametrize("counter", ["its own tokens", "every token it sent"])
def test_interleaved_deltas_of_another_reply_fail_the_run(fake_server, tmp_path: Path,
                                                          counter: str) -> None:
    """Deltas of another request's reply (the one that came before, in flight at
    concurrency 4) spliced into this reply's reasoning, a few at a time, all of them.

    A server that splices streams still counts each request's own tokens in its usage
    (what its engine generated for that request): this reply then streams more
    token-bearing deltas than the tokens its server says it generated
    (`usage_mismatch`, `judge.reply.usage`), or carries the other request's facts
    (`cross_talk`): every reply is caught. A server whose counter also counts what it
    spliced in is caught only through the other request's facts, where a code survives
    the splice whole (about half the replies; the run fails): spliced deltas that carry
    no fact of the other request read as this reply's own (docs/testing.md)."""
    rng = random.Random(9)
    spliced: list[str] = []

    def script(body: dict[str, Any], fake: Any) -> dict[str, Any]:
        ask = asked(body)
        other = next((a for a in reversed(fake.seen) if a.account != ask.account), None)
        own_text = _reasoning(rng, ask.account, ask.plan)
        mine = cut(own_text, rng, rng.randint(1, 3))
        if other is not None:  # the first request has none before it: its reply is whole
            spliced.append(ask.account)
            theirs = cut(_reasoning(rng, other.account, other.plan), rng, rng.randint(1, 3))
            mine_step, their_step = rng.randint(1, 6), rng.randint(1, 4)
            mixed: list[str] = []
            for n in range(max(len(mine) // mine_step, len(theirs) // their_step) + 1):
                mixed += mine[n * mine_step:(n + 1) * mine_step]
                mixed += theirs[n * their_step:(n + 1) * their_step]
            mine = mixed
        call = _call("change_plan", account_id=ask.account, plan=ask.plan)
        fn = call["function"]
        call_tokens = len(tokens(fn["name"] + fn["arguments"]))
        reasoning = len(tokens(own_text)) if counter == "its own tokens" else len(mine)
        return {"deltas": [("reasoning", t) for t in mine], "tool_calls": [call],
                "finish_reason": "tool_calls", "usage": (reasoning + call_tokens, reasoning)}

    code, summary = _serve(fake_server, tmp_path, script,
                           {"variant": "per-request", "accounts": 24})
    verdicts = summary["phases"]["measurement"]["verdicts"]
    assert code == 1, (verdicts, summary["gate"]["reasons"])
    assert verdicts.get("cross_talk", 0) >= MEASURED // 3, verdicts
    assert len(spliced) >= MEASURED - 1
    if counter == "its own tokens":  # every spliced reply caught
        assert verdicts.get("ok", 0) == MEASURED - len(spliced), verdicts
        assert verdicts.get("usage_mismatch", 0) >= MEASURED * 3 // 4, verdicts
    else:
        assert "usage_mismatch" not in verdicts, verdicts


def test_the_thresholds_of_the_echo() -> None:
    short = "word " * (MIN_ECHO_CHARS // 5 - 1)
    assert not sequence_problems(_record([short], [short + "and the answer after it, here."]))
    long = "word " * (MIN_ECHO_CHARS // 5 + 1)
    assert not sequence_problems(_record([long], [long + "ok"])), "the draft, written"
    assert sequence_problems(_record([long], [long + "and the answer after it, here."]))


@pytest.mark.parametrize("unit", ['{"name": "", "email": "", "phone": ""}, ',
                                  "| 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |\n",
                                  "INSERT INTO seats VALUES (NULL, NULL); ",
                                  "row, row, row your boat gently down ",
                                  "- [ ] todo item to be filled in later\n"])
def test_honest_periodic_text_is_no_replay_at_any_chunking(unit: str) -> None:
    """Many copies of one unit (a seed file's empty entries, zero table rows): wherever
    the server's events end, and whatever their size, a unit that equals its neighbours
    is the text's period, never a replayed event."""
    from loadgen.judge.reply.sequence import doubled_deltas, replayed_run

    for copies in (3, 7, 26):
        text = "Here they are:\n\n" + unit * copies + "\n\nEdit each one."
        for size in range(1, 2 * len(unit) + 2):
            for offset in range(0, size, max(1, size // 5)):
                cuts = [0, *range(offset or size, len(text), size), len(text)]
                deltas = [text[a:b] for a, b in itertools.pairwise(cuts) if b > a]
                assert replayed_run(deltas) is None, (copies, size, offset)
                assert doubled_deltas(deltas) is None, (copies, size, offset)
