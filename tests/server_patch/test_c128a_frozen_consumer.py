"""A consumer frozen at a full-width capture, fed later builds at smaller active widths.

This is #52448 on a CPU: the captured consumer keeps the capacity row stride;
capacity and prefix builds keep putting rows there, packed builds do not, so
under packed row 0 still reads right and rows >= 1 read other rows' or stale
slot ids.
"""

from __future__ import annotations

import pytest
import torch

from server_patch.c128a import CAPACITY, LAYOUTS, PACKED, PREFIX, FrozenDecodeReader, builder

CAPACITY_COLS = 32
ACTIVE_WIDTHS = (8, 16)


def _expected(case, c128a_oracle, width):
    decode, lens, _ = c128a_oracle(case, width)
    return torch.tensor(
        [[v if c < n else -1 for c, v in enumerate(row)] for row, n in zip(decode, lens,
                                                                          strict=True)]
    )


def _capture(layout, impl, case_factory, device):
    """A capture-time build at full width (vLLM captures with max_seq_len = max_model_len)."""
    capture = case_factory(900, device=device, capacity=CAPACITY_COLS, width=CAPACITY_COLS,
                           decode_reqs=6, tokens_per_req=1, prefill_tokens=2)
    buffers = capture.buffers()
    decode, _, _ = capture.call(builder(layout, impl=impl), buffers)
    assert decode.stride(0) == CAPACITY_COLS  # every layout agrees at full width
    reader = FrozenDecodeReader.capture(buffers[0], buffers[1], decode.view(decode.shape[0], 1,
                                                                            -1))
    return buffers, reader


def _run_step(case, buffers, layout, impl):
    """Rebuild into the same persistent buffers at the step's active width."""
    case.call(builder(layout, impl=impl), buffers)


def _steps(case_factory, device, tokens_per_req):
    for i, width in enumerate(ACTIVE_WIDTHS * 2):
        yield case_factory(
            300 + i, device=device, capacity=CAPACITY_COLS, width=width, decode_reqs=6 //
            tokens_per_req, tokens_per_req=tokens_per_req, prefill_tokens=2,
            disjoint_blocks=True, compress_ratio=4, positions_below=width * 4,
        )


@pytest.mark.parametrize("impl", ("torch", "triton"))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_frozen_consumer_one_token_requests(layout, impl, case_factory, c128a_oracle, device):
    """Distinct requests per row: every misplaced row is a wrong row."""
    buffers, reader = _capture(layout, impl, case_factory, device)
    for case in _steps(case_factory, device, tokens_per_req=1):
        _run_step(case, buffers, layout, impl)
        seen = reader.read(case.num_decode_tokens).cpu()
        want = _expected(case, c128a_oracle, CAPACITY_COLS)
        lens = buffers[1][: case.num_decode_tokens].cpu()
        assert (lens[1:] > 0).all(), "every row must have something to read"
        wrong_rows = [r for r in range(case.num_decode_tokens) if not torch.equal(seen[r], want[r])]
        if layout in (CAPACITY, PREFIX):
            assert wrong_rows == [], (layout, case.width)
        else:
            assert wrong_rows == list(range(1, case.num_decode_tokens)), (layout, case.width)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_frozen_consumer_speculative_decode_rows(layout, case_factory, c128a_oracle, device):
    """1 + spec-token rows (DSpark-style): capacity/prefix clean, packed corrupts some rows >= 1."""
    buffers, reader = _capture(layout, "triton", case_factory, device)
    corrupted = 0
    for case in _steps(case_factory, device, tokens_per_req=3):
        _run_step(case, buffers, layout, "triton")
        seen = reader.read(case.num_decode_tokens).cpu()
        want = _expected(case, c128a_oracle, CAPACITY_COLS)
        assert torch.equal(seen[0], want[0])
        corrupted += sum(
            not torch.equal(seen[r], want[r]) for r in range(1, case.num_decode_tokens)
        )
    if layout == PACKED:
        assert corrupted > 0
    else:
        assert corrupted == 0


def test_reader_refuses_a_view_of_another_buffer():
    buffer, other = torch.zeros(4, 8, dtype=torch.int32), torch.zeros(4, 8, dtype=torch.int32)
    with pytest.raises(ValueError, match="does not live"):
        FrozenDecodeReader.capture(buffer, torch.zeros(4, dtype=torch.int32), other[:2])
