"""The layouts' edges, pinned where mutation testing found them loose: the exact buffer
limits a call may reach, the words a refused call gets, and the plan each layout names.

A builder that refuses a batch its buffers hold would stop a server; one that accepts a
batch they do not hold would write past them. The words are what an operator reads.
"""

from __future__ import annotations

import re

import pytest
import torch

from server_patch.c128a import layouts
from server_patch.c128a.layouts import CAPACITY, LAYOUTS, PACKED, PREFIX, planner


def _buffers(decode_rows: int = 4, prefill_rows: int = 4, decode_cap: int = 16,
             prefill_cap: int = 16, lens: int = 4) -> tuple[torch.Tensor, ...]:
    return (torch.zeros(decode_rows, decode_cap, dtype=torch.int32),
            torch.zeros(lens, dtype=torch.int32),
            torch.zeros(prefill_rows, prefill_cap, dtype=torch.int32))


def _plan(layout: str, num_tokens: int, num_decode: int, buffers: tuple[torch.Tensor, ...],
          width: int = 8, full_width_decode: bool = False) -> layouts.Plan:
    decode, lens, prefill = buffers
    return planner(layout)(num_tokens, num_decode, decode, lens, prefill, width,
                           full_width_decode)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_plan_names_its_layout(layout: str) -> None:
    assert _plan(layout, 4, 2, _buffers()).layout == layout


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_batch_that_fills_every_row_is_accepted_and_one_more_is_refused(layout: str) -> None:
    plan = _plan(layout, 8, 4, _buffers())  # 4 decode rows, 4 prefill rows: all of them
    assert (plan.num_decode_tokens, plan.num_prefill_tokens) == (4, 4)
    with pytest.raises(ValueError, match=re.escape(
            "global_decode_buffer has 4 rows, the batch needs 5")):
        _plan(layout, 9, 5, _buffers(prefill_rows=8))
    with pytest.raises(ValueError, match=re.escape("prefill_buffer has 4 rows, the batch "
                                                   "needs 5")):
        _plan(layout, 9, 4, _buffers())


def test_the_row_count_named_is_the_rows_not_the_capacity() -> None:
    with pytest.raises(ValueError, match=re.escape(
            "global_decode_buffer has 3 rows, the batch needs 4")):
        _plan(PREFIX, 4, 4, _buffers(decode_rows=3, decode_cap=16))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_decode_token_count_must_lie_within_the_batch(layout: str) -> None:
    for bad in (-1, 5):
        with pytest.raises(ValueError, match=re.escape(
                f"num_decode_tokens={bad} must be within 0..4 (the tokens)")):
            _plan(layout, 4, bad, _buffers())
    assert _plan(layout, 4, 0, _buffers()).num_prefill_tokens == 4
    assert _plan(layout, 4, 4, _buffers()).num_prefill_tokens == 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_buffers_must_be_two_dimensional_rows_and_the_lens_one_slot_per_decode_token(
        layout: str) -> None:
    decode, lens, prefill = _buffers()
    with pytest.raises(ValueError, match=re.escape(
            "global_decode_buffer must be 2-D (rows, capacity), got shape (64,)")):
        planner(layout)(4, 2, decode.view(-1), lens, prefill, 8, False)
    with pytest.raises(ValueError, match=re.escape(
            "prefill_buffer rows must be contiguous (stride(-1) == 1)")):
        planner(layout)(4, 2, decode, lens, prefill.t(), 8, False)
    with pytest.raises(ValueError, match="^" + re.escape(
            "decode_lens_buffer must be 1-D with a slot per decode token") + "$"):
        planner(layout)(4, 3, decode, lens[:2], prefill, 8, False)
    with pytest.raises(ValueError, match="decode_lens_buffer must be 1-D"):
        planner(layout)(4, 2, decode, lens.view(2, 2), prefill, 8, False)
    plan = planner(layout)(4, 3, decode, lens[:3], prefill, 8, False)  # exactly enough slots
    assert plan.decode_lens.shape == (3,)


@pytest.mark.parametrize("layout", [PREFIX, PACKED])
def test_the_active_width_may_reach_the_smaller_capacity_and_no_further(layout: str) -> None:
    buffers = _buffers(decode_cap=16, prefill_cap=12)
    assert _plan(layout, 4, 2, buffers, width=12).decode_width == 12
    assert _plan(layout, 4, 2, buffers, width=1).decode_width == 1
    for bad in (0, 13):
        with pytest.raises(ValueError, match=re.escape(
                f"max_compressed_tokens={bad} must be within 1..12 (the buffers' capacity)")):
            _plan(layout, 4, 2, buffers, width=bad)
    # The decode buffer the smaller one: its capacity is the limit.
    with pytest.raises(ValueError, match=re.escape("must be within 1..10")):
        _plan(layout, 4, 2, _buffers(decode_cap=10, prefill_cap=16), width=11)


def test_packed_needs_a_contiguous_buffer() -> None:
    decode, lens, prefill = _buffers()
    wide = torch.zeros(4, 32, dtype=torch.int32)[:, :16]  # rows contiguous, buffer not
    with pytest.raises(ValueError, match="^" + re.escape(
            "the packed layout needs a contiguous buffer (it views it flat)") + "$"):
        planner(PACKED)(4, 2, wide, lens, prefill, 8, False)
    plan = planner(PACKED)(4, 2, decode, lens, prefill, 8, False)
    assert plan.decode_rows.stride() == (8, 1) and plan.decode_rows.shape == (2, 8)
    assert plan.prefill_rows.stride() == (8, 1) and plan.prefill_rows.shape == (2, 8)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_full_width_decode_view_is_asked_for_never_assumed(layout: str) -> None:
    decode, lens, prefill = _buffers()
    # Called with six arguments, as a caller that knows nothing of SM120 calls it.
    plan = planner(layout)(4, 2, decode, lens, prefill, 8)
    width = 16 if layout == CAPACITY else 8
    assert plan.decode_out.shape == (2, width)
    if layout == PREFIX:  # asked for: the contiguous full-width rows
        full = planner(PREFIX)(4, 2, decode, lens, prefill, 8, True)
        assert full.decode_out.shape == (2, 16) and full.decode_out.is_contiguous()
        assert full.decode_rows.shape == (2, 8)


def test_an_unknown_layout_is_refused_with_the_ones_there_are() -> None:
    with pytest.raises(ValueError, match=re.escape(
            "unknown C128A layout 'capcity'; expected one of capacity, prefix, packed")):
        planner("capcity")
    assert {planner(name) for name in LAYOUTS} == set(layouts._PLANNERS.values())


def test_a_cuda_device_without_an_index_asks_which_device_is_current(monkeypatch) -> None:
    asked: list[int] = []
    layouts._capability_major.cache_clear()
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "get_device_capability",
                        lambda index: (asked.append(index), (12 if index == 3 else 9, 0))[1])
    try:
        assert layouts.needs_contiguous_decode(torch.device("cuda")) is True
        assert layouts.needs_contiguous_decode(torch.device("cuda", 1)) is False
    finally:
        layouts._capability_major.cache_clear()
    assert asked == [3, 1]
