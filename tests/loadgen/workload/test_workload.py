"""Workloads are deterministic from their seed and shaped as the bug needs."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from pathlib import Path

import httpx
import orjson
import pytest

from loadgen.engine.preflight import calibrate_chars_per_token
from loadgen.exit_codes import BadInputError
from loadgen.scenario import Scenario
from loadgen.workload import make_workload
from loadgen.workload.tool_turn import REPORTED_ACCOUNT


def take(sc: Scenario, n: int, **kw) -> list:
    return list(itertools.islice(make_workload(sc, **kw).items(), n))


def test_tool_turn_is_the_reported_conversation() -> None:
    items = take(Scenario(workload={"kind": "tool-turn"}), 3)
    assert len({orjson.dumps(i.messages) for i in items}) == 1  # identical bodies
    msgs = items[0].messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant",
                                         "user"]
    assert msgs[-1]["content"] == f"Please upgrade {REPORTED_ACCOUNT} to business, then cancel it."
    assert {t["function"]["name"] for t in items[0].tools} >= {"change_plan",
                                                               "cancel_subscription"}


def test_tool_turn_accounts_and_seed_determinism() -> None:
    sc = Scenario(workload={"kind": "tool-turn", "accounts": 4, "seed": 7})
    a = [i.item_id for i in take(sc, 8)]
    assert a == [i.item_id for i in take(sc, 8)]
    assert len(set(a)) == 4 and a[:4] == a[4:]
    other = Scenario(workload={"kind": "tool-turn", "accounts": 4, "seed": 8})
    assert [i.item_id for i in take(other, 4)] != a[:4]


def test_long_context_spreads_lengths() -> None:
    sc = Scenario(workload={"kind": "long-context", "context_tokens": [64, 1024, 4096],
                            "seed": 3})
    items = take(sc, 64)
    lengths = Counter(i.approx_prompt_tokens for i in items)
    assert set(lengths) == {64, 1024, 4096}
    assert all(v >= 8 for v in lengths.values())
    for item in items[:6]:
        chars = len(item.messages[1]["content"])
        assert chars == pytest.approx(item.approx_prompt_tokens * 4.0, rel=0.1, abs=250)
    assert [orjson.dumps(i.messages) for i in take(sc, 5)] == \
        [orjson.dumps(i.messages) for i in items[:5]]


def test_long_context_weights_and_calibration() -> None:
    sc = Scenario(workload={"kind": "long-context", "context_tokens": [100, 2000],
                            "weights": [9, 1]})
    lengths = Counter(i.approx_prompt_tokens for i in take(sc, 64))
    assert lengths[100] > lengths[2000]
    item = next(i for i in take(sc, 64, chars_per_token=2.0) if i.approx_prompt_tokens == 2000)
    assert len(item.messages[1]["content"]) == pytest.approx(4000, abs=400)


def test_replay_sends_bodies_as_they_are(tmp_path: Path) -> None:
    f = tmp_path / "b.jsonl"
    f.write_text('{"messages": [{"role": "user", "content": "a"}], "max_tokens": 9, '
                 '"model": "prod", "stream": false}\n\n'
                 '{"messages": [{"role": "user", "content": "b"}], "tools": []}\n')
    sc = Scenario(workload={"kind": "replay", "path": str(f)})
    items = take(sc, 3)
    assert [i.item_id for i in items] == ["replay/1", "replay/2", "replay/1"]
    assert items[0].body == {"max_tokens": 9}  # model/stream are owned by the runner


@pytest.mark.parametrize("text,problem", [
    ("not json\n", "line 1: not valid JSON"),
    ('{"prompt": "x"}\n', "line 1: needs an object with a 'messages' list"),
    ("\n", "has no request bodies"),
])
def test_replay_bad_files(tmp_path: Path, text: str, problem: str) -> None:
    f = tmp_path / "b.jsonl"
    f.write_text(text)
    with pytest.raises(BadInputError, match=problem):
        make_workload(Scenario(workload={"kind": "replay", "path": str(f)}))


def test_calibration_uses_tokenize(fake_server) -> None:
    _, srv = fake_server()

    async def go() -> tuple[float | None, float | None]:
        async with httpx.AsyncClient() as http:
            good = await calibrate_chars_per_token(http, srv.url, "fake-dsv4")
            bad = await calibrate_chars_per_token(http, "http://127.0.0.1:9", "x")
        return good, bad

    good, bad = asyncio.run(go())
    assert good == pytest.approx(4.0, rel=0.01) and bad is None
