"""The engine's mechanism, without HTTP: what each layout makes the decode rows read."""

from __future__ import annotations

import pytest

from server_patch.sim.config import SimConfig
from server_patch.sim.model import make_script
from tests.sim.drive import drive

MESSAGES = [{"role": "user", "content": "Please upgrade XEHM4B to business, then cancel it."}]


@pytest.mark.parametrize("layout", ["capacity", "prefix"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_capacity_and_prefix_never_misread(layout: str, seed: int) -> None:
    engine = drive(layout, concurrency=12, requests=40, seed=seed)
    st = engine.stats
    assert st.finished_requests == 40
    assert st.misread_rows == 0 and st.corrupted_requests == 0
    assert st.pure_decode_steps > 50  # the frozen consumer really was exercised


def test_packed_misreads_rows_after_the_first() -> None:
    engine = drive("packed", concurrency=12, requests=40)
    st = engine.stats
    assert st.corrupted_requests > 0 and st.misread_rows > 0
    assert st.first_corruption_step is not None


@pytest.mark.parametrize("layout", ["packed", "capacity", "prefix"])
def test_a_single_stream_is_never_misread(layout: str) -> None:
    engine = drive(layout, concurrency=1, requests=6)
    assert engine.stats.misread_rows == 0


def test_blocks_are_recycled_last_freed_first() -> None:
    engine = drive("capacity", concurrency=4, requests=8)
    pool = engine.pool
    assert pool.usage == 0.0  # every finished request gave its blocks back
    first: list[int] = []
    pool.allocate(first, engine.cfg.kv_block_size * 2)
    held = list(first)
    pool.release(first)
    again: list[int] = []
    pool.allocate(again, engine.cfg.kv_block_size * 2)
    assert again == [held[1], held[0]]  # stale blocks come back first, as in vLLM


def test_reply_is_deterministic_from_the_request() -> None:
    a = make_script(MESSAGES, None)
    b = make_script(MESSAGES, None)
    assert a == b
    other = make_script([{"role": "user", "content": "Something else entirely."}], None)
    assert other.reasoning != a.reasoning


def test_active_width_and_capacity_follow_vllm_arithmetic() -> None:
    cfg = SimConfig(max_model_len=4096, compress_ratio=16, alignment=16)
    assert cfg.capacity == 256
    assert cfg.active_width(4096) == 256
    assert cfg.active_width(300) == 32  # next_pow2(300 // 16 = 18)
    assert cfg.active_width(10) == 16  # the alignment floor
