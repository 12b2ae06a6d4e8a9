"""`usage_mismatch`: the server's own token count against what it streamed and allowed.

Generated families, served end to end: replies whose text is right but whose usage is
impossible (a counter stuck at zero, fewer tokens than deltas streamed, more than
max_tokens, more reasoning than completion) fail the gate; honest counts (several
tokens packed into a delta, exactly max_tokens) pass.
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
#: deltas it streamed and a random draw.
LIES = {
    "stuck at zero": lambda deltas, rng: (0, 0),
    "fewer than streamed": lambda deltas, rng: (deltas - rng.randint(1, deltas - 1), 0),
    "more than max_tokens": lambda deltas, rng: (MAX_TOKENS + rng.randint(1, 500), 3),
    "more reasoning than completion": lambda deltas, rng: (deltas + 2, deltas + 9),
}
HONEST = {
    "several tokens a delta": lambda deltas, rng: (deltas * rng.randint(2, 7), deltas),
    "one token a delta": lambda deltas, rng: (deltas, 1),
    "exactly max_tokens": lambda deltas, rng: (MAX_TOKENS, 2),
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
        deltas = -(-len(reasoning) // 40) + 1 + -(-len(call["function"]["arguments"]) // 12)
        return {"reasoning": reasoning, "content": "", "tool_calls": [call],
                "finish_reason": "tool_calls", "usage": family(deltas, rng)}

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
            stream: bool = True, error: str | None = None) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", status=200, finish_reason="stop",
                         params={"max_tokens": 100, "stream": stream}, content="Done.",
                         usage=Usage(completion_tokens=completion, reasoning_tokens=reasoning),
                         timings=Timings(chunks=chunks), error=error)


def test_what_is_not_judged() -> None:
    assert usage_problem(_record(None, 9)) is None, "no usage said: nothing to judge"
    assert usage_problem(_record(3, 9, error="stream error")) is None, "never final"
    assert usage_problem(_record(3, 9, stream=False)) is None, "no deltas counted"
    assert usage_problem(_record(100, 100)) is None
    assert "fewer than the 9" in (usage_problem(_record(3, 9)) or "")
    assert "more than the request's max_tokens 100" in (usage_problem(_record(101, 9)) or "")
    assert "reasoning" in (usage_problem(_record(9, 9, reasoning=10)) or "")
