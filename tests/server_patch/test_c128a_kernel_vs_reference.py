"""The Triton kernel and the torch reference have the same memory effects.

Not just equal returned views: both start from identical garbage-filled
persistent buffers and must leave them byte-identical, so the reference writes
exactly the rows, strides and columns the kernel writes (the sim's bug
reproduction depends on that). Without CUDA the kernel runs in Triton's CPU
interpreter (TRITON_INTERPRET=1, set by conftest).
"""

from __future__ import annotations

import random

import pytest
import torch

from server_patch.c128a import LAYOUTS, builder


def _random_cases(case_factory, device, count: int = 8):
    rng = random.Random(20260815)
    cases = []
    for i in range(count):
        capacity = rng.choice([8, 24, 40, 130])
        cases.append(
            case_factory(
                1000 + i,
                device=device,
                capacity=capacity,
                width=rng.choice([1, max(capacity // 4, 1), capacity // 2 + 1, capacity]),
                block_size=rng.choice([1, 2, 3, 16]),
                compress_ratio=rng.choice([4, 128]),
                decode_reqs=rng.randint(1, 3),
                tokens_per_req=rng.randint(2, 4),
                prefill_tokens=rng.randint(2, 4),
                padded_decode=rng.randint(0, 2),
            )
        )
    # One case wider than the kernel's column block, so several column blocks run.
    cases.append(case_factory(77, device=device, capacity=1100, width=600, decode_reqs=2,
                              tokens_per_req=2, prefill_tokens=2, padded_decode=1))
    return cases


def _assert_same_effects(case, layout: str) -> None:
    ref_buffers, kernel_buffers = case.buffers(), case.buffers()
    ref = case.call(builder(layout, impl="torch"), ref_buffers)
    got = case.call(builder(layout, impl="triton"), kernel_buffers)
    if case.positions.is_cuda:
        torch.cuda.synchronize()
    for name, want, have in zip(("decode", "lens", "prefill"), ref_buffers, kernel_buffers,
                                strict=True):
        assert torch.equal(want, have), f"{layout}: {name} buffer differs (seed {case.seed})"
    for want, have, ref_buffer, kernel_buffer in zip(
        ref, got, ref_buffers, kernel_buffers, strict=True
    ):
        assert want.shape == have.shape and want.stride() == have.stride()
        assert want.data_ptr() - ref_buffer.data_ptr() == have.data_ptr() - kernel_buffer.data_ptr()
        assert torch.equal(want, have)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernel_matches_reference_on_random_cases(layout, case_factory, device):
    cases = _random_cases(case_factory, device)
    for case in cases:
        assert case.num_decode_tokens >= 2 and case.num_prefill_tokens >= 2
        _assert_same_effects(case, layout)
    assert any((case.slot_mapping[: case.num_decode_tokens] < 0).any() for case in cases)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kernel_and_reference_match_the_oracle(layout, case_factory, c128a_oracle, device):
    """Both implementations against the issue's semantics written as plain loops."""
    for seed in range(3):
        case = case_factory(seed, device=device, capacity=24, width=8, block_size=2,
                            decode_reqs=2, tokens_per_req=3, prefill_tokens=3, padded_decode=1)
        for impl in ("torch", "triton"):
            decode, lens, prefill = case.call(builder(layout, impl=impl), case.buffers())
            width = decode.shape[1]
            want_decode, want_lens, want_prefill = c128a_oracle(case, width)
            assert decode.tolist() == want_decode, (layout, impl, seed)
            assert lens.tolist() == want_lens, (layout, impl, seed)
            assert prefill.tolist() == want_prefill, (layout, impl, seed)
