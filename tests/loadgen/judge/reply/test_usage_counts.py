"""`usage_mismatch`: the server's own token count against what it streamed and allowed.

Generated families, served end to end: replies whose text is right but whose usage is
impossible (a counter stuck at zero, fewer tokens than deltas streamed, more than
max_tokens, more reasoning than completion, fewer reasoning tokens than reasoning
deltas: another stream's deltas in this one) fail the gate; honest counts (several
tokens packed into a delta, exactly max_tokens, reasoning not counted, one reasoning
delta more than its tokens where a parser released held text) pass.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from loadgen.judge.reply.usage import usage_problem
from loadgen.records import RequestRecord, Timings, Usage
from tests.loadgen.conftest import run_cli
from tests.support.broken_servers import _call
from tests.support.openai_fake import asked
from tests.support.scenario_files import write_scenario

MAX_TOKENS = 400
#: Each family: the usage (completion, reasoning) a reply says, from the token-bearing
#: deltas it streamed, those of them that carried reasoning, and a random draw.
LIES = {
    "stuck at zero": lambda deltas, thought, rng: (0, 0),
    "fewer than streamed": lambda deltas, thought, rng: (
        deltas - rng.randint(1, deltas - 1), 0),
    "more than max_tokens": lambda deltas, thought, rng: (
        MAX_TOKENS + rng.randint(1, 500), thought),
    "more reasoning than completion": lambda deltas, thought, rng: (deltas + 2, deltas + 9),
    "fewer reasoning than its deltas": lambda deltas, thought, rng: (
        deltas * 2, thought - rng.randint(2, thought - 1)),
}
HONEST = {
    "several tokens a delta": lambda deltas, thought, rng: (
        deltas * rng.randint(2, 7), thought * rng.randint(1, 3)),
    "one token a delta": lambda deltas, thought, rng: (deltas, thought),
    "exactly max_tokens": lambda deltas, thought, rng: (MAX_TOKENS, thought),
    "reasoning not counted": lambda deltas, thought, rng: (deltas, 0),
    "a held marker released": lambda deltas, thought, rng: (deltas, thought - 1),
}


def _script(family: Any, seed: int) -> Any:
    rng = random.Random(seed)

    def script(body: dict[str, Any], fake: Any) -> dict[str, Any]:
        ask = asked(body)
        reasoning = ("The user wants the plan changed; I will call change_plan for the "
                     "account they named. " * rng.randint(1, 4))
        call = _call("change_plan", account_id=ask.codes[0], plan=ask.plan)
        # Deltas the fake streams: 40 characters of reasoning each, the call's head and
        # its arguments 12 characters at a time.
        thought = -(-len(reasoning) // 40)
        deltas = thought + 1 + -(-len(call["function"]["arguments"]) // 12)
        return {"reasoning": reasoning, "content": "", "tool_calls": [call],
                "finish_reason": "tool_calls", "usage": family(deltas, thought, rng)}

    return script


def _serve(fake_server, tmp_path: Path, script: Any) -> tuple[int, dict[str, Any]]:
    fake, srv = fake_server(("scripted",))
    fake.script = script
    sc = write_scenario(tmp_path / "s.toml", load={"concurrency": 4, "priming": 0,
                                                   "measurement": 12},
                        request={"max_tokens": MAX_TOKENS}, workload={"kind": "tool-turn"},
                        gate={"prove_below": 0.5})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    return proc.returncode, json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("family", sorted(LIES))
def test_a_server_whose_counts_are_impossible_fails(fake_server, tmp_path: Path,
                                                    family: str) -> None:
    code, summary = _serve(fake_server, tmp_path, _script(LIES[family], 1))
    assert code == 1, summary["gate"]["reasons"]
    assert summary["phases"]["measurement"]["verdicts"] == {"usage_mismatch": 12}


@pytest.mark.parametrize("family", sorted(HONEST))
def test_honest_counts_pass(fake_server, tmp_path: Path, family: str) -> None:
    code, summary = _serve(fake_server, tmp_path, _script(HONEST[family], 2))
    assert code == 0, (summary["phases"]["measurement"]["verdicts"], summary["gate"]["reasons"])
    assert summary["phases"]["measurement"]["verdicts"] == {"ok": 12}


def _record(completion: int | None, chunks: int, *, reasoning: int | None = None,
            stream: bool = True, error: str | None = None, thought: int = 0
            ) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", status=200, finish_reason="stop",
                         params={"max_tokens": 100, "stream": stream}, content="Done.",
                         usage=Usage(completion_tokens=completion, reasoning_tokens=reasoning),
                         timings=Timings(chunks=chunks, reasoning_chunks=thought),
                         error=error)


def test_what_is_not_judged() -> None:
    assert usage_problem(_record(None, 9)) is None, "no usage said: nothing to judge"
    assert usage_problem(_record(3, 9, error="stream error")) is None, "never final"
    assert usage_problem(_record(3, 9, stream=False)) is None, "no deltas counted"
    assert usage_problem(_record(100, 100)) is None
    assert "fewer than the 9" in (usage_problem(_record(3, 9)) or "")
    assert "more than the request's max_tokens 100" in (usage_problem(_record(101, 9)) or "")
    assert "reasoning" in (usage_problem(_record(9, 9, reasoning=10)) or "")


def test_reasoning_deltas_against_reasoning_tokens() -> None:
    """Each reasoning delta carries a reasoning token, one more allowed (held text a
    parser releases with the marker that ends the reasoning); 0 is no count at all."""
    assert usage_problem(_record(50, 20, reasoning=10, thought=11)) is None
    assert "fewer than the 12 reasoning deltas" in (
        usage_problem(_record(50, 20, reasoning=10, thought=12)) or "")
    assert usage_problem(_record(50, 20, reasoning=0, thought=12)) is None
    assert usage_problem(_record(50, 20, reasoning=None, thought=12)) is None
    assert usage_problem(_record(50, 20, reasoning=10, thought=40, stream=False)) is None
