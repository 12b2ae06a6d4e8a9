"""The sim's prefix cache and the indexer shortcut of vLLM #52492, without HTTP.

The load generator's own session and known-answer workloads drive the engine in a
closed loop (their prompts tokenized as the sim's API does), so these are the prompts a
run sends: a shared prefix above and below 2048 tokens, tool loops that append, new user
turns that rewrite, needles in one filler per length.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from loadgen.engine.preflight import CALIBRATION_TEXT
from loadgen.scenario import Scenario
from loadgen.workload import make_workload
from loadgen.workload.mix import first_cycle
from server_patch.sim.closed_loop import run_closed_loop
from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine
from server_patch.sim.model import Reply, count_tokens, make_script, render_prompt, tokenize
from server_patch.sim.prefix_cache import PrefixCache
from server_patch.sim.skills import alter

#: What a run calibrates on the sim's /tokenize (`engine.preflight`).
CHARS_PER_TOKEN = len(CALIBRATION_TEXT) / count_tokens(CALIBRATION_TEXT)


def items(workload: dict[str, Any]) -> list[Any]:
    scenario = Scenario.model_validate({"workload": workload})
    return first_cycle(make_workload(scenario, CHARS_PER_TOKEN).items())


def run(cfg: SimConfig, sent: list[Any], concurrency: int, max_tokens: int = 120) -> Any:
    queue = iter(sent)

    def next_request() -> tuple[int, Reply, list[str]]:
        item = next(queue)
        tokens = tokenize(render_prompt(item.messages, item.tools))
        thinking = item.reasoning is not False
        return len(tokens), Reply(make_script(item.messages, item.tools, 0, thinking),
                                  max_tokens), tokens

    return run_closed_loop(Engine(cfg), next_request, concurrency=concurrency,
                           count=len(sent))


def answer(request: Any) -> str:
    """What the reply wrote after its reasoning: its content, or its call's arguments."""
    s = request.reply.script
    return "".join(s.tool_arguments if s.tool_name else s.answer)


SESSIONS = {"kind": "session", "sessions": 6, "shared_prefix_tokens": [600, 2600]}


def sim(**knobs: Any) -> SimConfig:
    return SimConfig(**{"max_num_seqs": 16, "max_model_len": 8192, **knobs})


def test_sessions_hit_the_cache_and_are_answered_right_with_the_shortcut_decided_at_runtime(
        ) -> None:
    sent = items(SESSIONS)
    done = run(sim(prefix_caching=True, indexer="runtime"), sent, concurrency=6)
    st = done.stats
    assert st.prefix_cache_hits > 0.5 * st.prefix_cache_queries
    assert st.misread_rows == st.foreign_rows == 0  # a cached block is the request's own
    assert st.unselected_facts == st.foreign_facts == st.indexer_shortcut_requests == 0
    for request, item in zip(done.requests, sent, strict=True):
        assert not request.reply.misread, item.item_id
        exp = item.expected
        for check in exp.checks:
            assert exp.facts[check.fact] in answer(request), item.item_id


@pytest.mark.long
def test_the_captured_shortcut_alters_facts_only_past_2048_tokens_on_a_cache_hit() -> None:
    sent = items(SESSIONS)
    done = run(sim(prefix_caching=True, indexer="captured"), sent, concurrency=6)
    st = done.stats
    assert st.indexer_shortcut_requests > 0 and st.unselected_facts > 0
    by_prefix: dict[str, list[bool]] = {}
    for request, item in zip(done.requests, sent, strict=True):
        altered = bool(request.reply.misread)
        by_prefix.setdefault(item.tags["prefix_tokens"], []).append(altered)
        if altered:
            assert request.cached > 0 and request.shortcut
            # Every fact it copied altered sits past the shortcut's 2048 tokens.
            for k in request.reply.misread:
                assert request.reply.script.positions[k] >= 2048
                fact = request.reply.script.facts[k]
                got = request.reply.values[k]
                assert got != fact.value and len(got) == len(fact.value)
    assert not any(by_prefix["600"])  # below 2048: never
    assert sum(by_prefix["2600"]) > len(by_prefix["2600"]) // 2
    # Without the cache no prefill is a short replay: the same shortcut never fires.
    cold = run(sim(prefix_caching=False, indexer="captured"), items(SESSIONS), 6).stats
    assert cold.indexer_shortcut_requests == 0 and cold.prefix_cache_hits == 0


def test_needles_share_their_filler_and_the_shortcut_gives_one_wrong_digit() -> None:
    sent = items({"kind": "known-answer", "probes": ["needle"], "needle_tokens": [500, 2700],
                  "needle_depths": [0.1, 0.95]})
    done = run(sim(prefix_caching=True, indexer="captured", max_model_len=4096), sent, 8)
    wrong = [(r, i) for r, i in zip(done.requests, sent, strict=True) if r.reply.misread]
    assert wrong
    for request, item in wrong:
        assert item.item_id.endswith("/d0.95") and "/2700+" in item.item_id
        code = item.expected.facts["code"]
        written = request.reply.values[0]
        assert sum(a != b for a, b in zip(code, written, strict=True)) == 1


@pytest.mark.parametrize("seed", range(20))
def test_an_altered_value_differs_in_one_character_of_its_class(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789abcdefαβγδ東京大阪-_"
    value = "".join(rng.choice(alphabet) for _ in range(rng.randint(6, 14)))
    got = alter(value, "text", rng.randrange(10_000))
    diff = [i for i in range(len(value)) if value[i] != got[i]]
    assert len(got) == len(value) and len(diff) == 1
    a, b = value[diff[0]], got[diff[0]]
    assert a.isdigit() == b.isdigit() and a.isupper() == b.isupper() and b.isalnum()
    assert alter("2026-04-30", "date", seed) != "2026-04-30"


def test_the_cache_finds_a_prefix_only_under_the_prefix_that_wrote_it() -> None:
    cache = PrefixCache(block_size=4)
    a = [f"t{i}" for i in range(13)]
    hashes = cache.hashes(a)
    assert len(hashes) == 3  # full blocks only
    cache.register(hashes, [7, 8, 9])
    assert cache.lookup(cache.hashes(a), len(a)) == [7, 8, 9]
    assert cache.lookup(cache.hashes(a[:12]), 12) == [7, 8]  # a token is left to compute
    changed = ["x", *a[1:]]
    assert cache.lookup(cache.hashes(changed), len(changed)) == []
    cache.evict(8)
    assert cache.lookup(cache.hashes(a), len(a)) == [7]


def test_shared_blocks_outlive_one_holder_and_freed_ones_are_handed_out_last() -> None:
    cfg = sim(prefix_caching=True)
    engine = Engine(cfg)
    pool = engine.pool
    first: list[int] = []
    pool.allocate(first, 3 * cfg.kv_block_size)
    hashes = pool.cache.hashes([f"w{i}" for i in range(3 * cfg.kv_block_size)])
    pool.mark_cached(hashes, first)
    written = list(first)
    second = list(first[:2])
    pool.share(second)
    pool.release(first)
    assert not set(second) & set(pool.free)  # still held by the second request
    pool.release(second)
    fresh: list[int] = []
    pool.allocate(fresh, cfg.kv_block_size)
    assert fresh[0] not in written  # the cached ones wait at the far end...
    assert all(pool.cache.is_cached(b) for b in written)  # ...still findable
    assert pool.cache.lookup(hashes, 3 * cfg.kv_block_size + 1) == written
