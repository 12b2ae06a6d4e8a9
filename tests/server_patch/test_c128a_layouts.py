"""The three layouts' contracts: strides, widths, what is written and what is not."""

from __future__ import annotations

import pytest
import torch

from server_patch.c128a import CAPACITY, IMPLS, LAYOUTS, PACKED, PREFIX, builder, layouts

IMPL_UNDER_TEST = ("torch", "triton")


def _case(case_factory, device, **overrides):
    params = dict(capacity=32, width=8, decode_reqs=2, tokens_per_req=3, prefill_tokens=3,
                  padded_decode=1)
    params.update(overrides)
    return case_factory(5, device=device, **params)


@pytest.mark.parametrize("impl", IMPL_UNDER_TEST)
@pytest.mark.parametrize("layout", [CAPACITY, PREFIX])
def test_capacity_and_prefix_keep_the_buffer_row_stride(layout, impl, case_factory, device):
    case = _case(case_factory, device)
    buffers = case.buffers()
    decode, lens, prefill = case.call(builder(layout, impl=impl), buffers)
    assert decode.stride(0) == buffers[0].stride(0) == case.capacity
    assert prefill.stride(0) == buffers[2].stride(0) == case.capacity
    assert decode.data_ptr() == buffers[0].data_ptr()
    assert prefill.data_ptr() == buffers[2].data_ptr()
    assert decode.shape == (case.num_decode_tokens, case.capacity if layout == CAPACITY else 8)
    assert prefill.shape == (case.num_prefill_tokens, case.capacity if layout == CAPACITY else 8)
    assert lens.shape == (case.num_decode_tokens,)


@pytest.mark.parametrize("impl", IMPL_UNDER_TEST)
def test_packed_rows_sit_at_the_active_width(impl, case_factory, c128a_oracle, device):
    case = _case(case_factory, device)
    buffers = case.buffers()
    decode, _, prefill = case.call(builder(PACKED, impl=impl), buffers)
    assert decode.stride(0) == prefill.stride(0) == case.width != buffers[0].stride(0)
    # The rows are really packed in the persistent buffer's memory, not a copy.
    want_decode, _, want_prefill = c128a_oracle(case, case.width)
    flat_decode = buffers[0].view(-1)[: case.num_decode_tokens * case.width]
    flat_prefill = buffers[2].view(-1)[: case.num_prefill_tokens * case.width]
    assert flat_decode.tolist() == [v for row in want_decode for v in row]
    assert flat_prefill.tolist() == [v for row in want_prefill for v in row]


@pytest.mark.parametrize("impl", IMPL_UNDER_TEST)
def test_prefix_leaves_the_tail_and_the_spare_rows_untouched(impl, case_factory, device):
    case = _case(case_factory, device)
    before = [b.clone() for b in case.buffers()]
    buffers = case.buffers()
    case.call(builder(PREFIX, impl=impl), buffers)
    n_dec, n_pre, w = case.num_decode_tokens, case.num_prefill_tokens, case.width
    assert torch.equal(buffers[0][:n_dec, w:], before[0][:n_dec, w:])
    assert torch.equal(buffers[2][:n_pre, w:], before[2][:n_pre, w:])
    assert torch.equal(buffers[0][n_dec:], before[0][n_dec:])
    assert torch.equal(buffers[2][n_pre:], before[2][n_pre:])
    assert torch.equal(buffers[1][n_dec:], before[1][n_dec:])
    assert not torch.equal(buffers[0][:n_dec, :w], before[0][:n_dec, :w])


@pytest.mark.parametrize("impl", IMPL_UNDER_TEST)
def test_capacity_writes_whole_rows_and_ignores_the_requested_width(impl, case_factory,
                                                                    c128a_oracle, device):
    case = _case(case_factory, device)
    buffers = case.buffers()
    # vLLM 0.29+ passes the active width; capacity still writes the full capacity.
    decode, _, prefill = case.call(builder(CAPACITY, impl=impl), buffers)
    want_decode, _, want_prefill = c128a_oracle(case, case.capacity)
    assert decode.tolist() == want_decode
    assert prefill.tolist() == want_prefill
    assert int((buffers[0][: case.num_decode_tokens] < -1).sum()) == 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_padded_decode_tokens_get_length_zero(layout, case_factory, device):
    case = _case(case_factory, device, padded_decode=2)
    pad = case.slot_mapping[: case.num_decode_tokens] < 0
    assert int(pad.sum()) >= 2
    _, lens, _ = case.call(builder(layout, impl="triton"), case.buffers())
    assert (lens[pad] == 0).all()
    assert (lens[~pad] > 0).any()


def test_capacity_accepts_the_upstream_default_width(case_factory):
    """0.26/0.28 callers pass the capacity; a caller relying on the 8192 default must not crash."""
    case = _case(case_factory, "cpu")
    buffers = case.buffers()
    fn = builder(CAPACITY, impl="torch")
    decode, _, prefill = fn(
        case.positions, case.compress_ratio, case.num_decode_tokens, case.token_to_req_indices,
        case.block_table, case.block_size, case.slot_mapping, *buffers,
    )
    assert decode.shape[1] == prefill.shape[1] == case.capacity


@pytest.mark.parametrize("layout", [PREFIX, PACKED])
@pytest.mark.parametrize("width", [0, 33])
def test_prefix_and_packed_refuse_a_width_outside_the_capacity(layout, width, case_factory):
    case = _case(case_factory, "cpu", width=width)
    with pytest.raises(ValueError, match="max_compressed_tokens"):
        case.call(builder(layout, impl="torch"), case.buffers())


def test_bad_calls_are_refused_with_a_reason(case_factory):
    case = _case(case_factory, "cpu")
    decode, lens, prefill = case.buffers()
    fn = builder(PREFIX, impl="torch")
    args = (case.positions, 128)
    tail = (case.token_to_req_indices, case.block_table, 2, case.slot_mapping)
    with pytest.raises(ValueError, match="num_decode_tokens"):
        fn(*args, case.positions.shape[0] + 1, *tail, decode, lens, prefill, 8)
    with pytest.raises(ValueError, match="2-D"):
        fn(*args, 2, *tail, decode.view(-1), lens, prefill, 8)
    with pytest.raises(ValueError, match="rows"):
        fn(*args, 2, *tail, decode, lens, prefill[:1], 8)
    with pytest.raises(ValueError, match="contiguous"):
        fn(*args, 2, *tail, decode.t(), lens, prefill, 8)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("impl", IMPL_UNDER_TEST)
def test_an_empty_batch_writes_nothing(layout, impl, case_factory, device):
    case = _case(case_factory, device)
    before = [b.clone() for b in case.buffers()]
    buffers = case.buffers()
    empty = case.positions[:0]
    decode, lens, prefill = builder(layout, impl=impl)(
        empty, 128, 0, case.token_to_req_indices, case.block_table, 2, case.slot_mapping,
        *buffers, max_compressed_tokens=8,
    )
    assert decode.shape[0] == lens.shape[0] == prefill.shape[0] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, buffers, strict=True))


@pytest.mark.parametrize("impl", IMPL_UNDER_TEST)
def test_decode_only_and_prefill_only_batches(impl, case_factory, c128a_oracle, device):
    for decode_reqs, prefill_tokens in ((2, 0), (0, 3)):
        case = _case(case_factory, device, decode_reqs=max(decode_reqs, 1), padded_decode=0,
                     prefill_tokens=prefill_tokens)
        if decode_reqs == 0:  # turn every token into a prefill token
            case.num_decode_tokens = 0
        decode, lens, prefill = case.call(builder(PREFIX, impl=impl), case.buffers())
        want_decode, want_lens, want_prefill = c128a_oracle(case, case.width)
        assert (decode.tolist(), lens.tolist(), prefill.tolist()) == (
            want_decode, want_lens, want_prefill)


@pytest.mark.parametrize("impl", IMPL_UNDER_TEST)
def test_prefix_on_sm120_returns_the_contiguous_full_width_decode_rows(
    impl, case_factory, device, monkeypatch
):
    """FlashInfer's SM120 path needs contiguous decode indices (upstream PR #53574)."""
    monkeypatch.setattr(layouts, "needs_contiguous_decode", lambda dev: True)
    case = _case(case_factory, device)
    before = case.buffers()
    buffers = case.buffers()
    decode, _, prefill = case.call(builder(PREFIX, impl=impl), buffers)
    n, w = case.num_decode_tokens, case.width
    assert decode.shape == (n, case.capacity) and decode.is_contiguous()
    assert decode.stride(0) == buffers[0].stride(0)
    assert prefill.shape == (case.num_prefill_tokens, w)
    assert torch.equal(buffers[0][:n, w:], before[0][:n, w:])  # still only the prefix written
    for layout in (CAPACITY, PACKED):  # the others are unaffected
        other, _, _ = case.call(builder(layout, impl=impl), case.buffers())
        assert other.shape[1] == (case.capacity if layout == CAPACITY else w)


def test_only_capability_12_needs_contiguous_decode(monkeypatch):
    assert layouts.needs_contiguous_decode(torch.device("cpu")) is False
    for major, expected in ((9, False), (10, False), (12, True)):
        layouts._capability_major.cache_clear()
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index, m=major: (m, 0))
        assert layouts.needs_contiguous_decode(torch.device("cuda", 0)) is expected
    layouts._capability_major.cache_clear()


def test_builder_rejects_unknown_layouts_and_impls():
    with pytest.raises(ValueError, match="layout"):
        builder("capcity")
    with pytest.raises(ValueError, match="impl"):
        builder(CAPACITY, impl="cuda")
    assert set(IMPLS) == {"auto", "triton", "torch"}
    assert LAYOUTS == ("capacity", "prefix", "packed")
