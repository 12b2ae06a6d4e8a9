"""The stride guard on its own: what it counts, what it records, strict mode, cost discipline.

Builders run on persistent buffers shared by every call, as vLLM's are; a
"narrow" batch is one whose active width (max_compressed_tokens) is below the
buffers' capacity, which is where a packing builder's rows leave the stride a
captured CUDA graph reads.
"""

from __future__ import annotations

import logging
import random

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from server_patch import guard as guard_mod
from server_patch.c128a import builder, qualified_name
from server_patch.guard import StrideGuard, StrideViolationError

CAPACITY = 32
ROWS = 64


def persistent_buffers() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.full((ROWS, CAPACITY), -7, dtype=torch.int32),
        torch.zeros(ROWS, dtype=torch.int32),
        torch.full((ROWS, CAPACITY), -7, dtype=torch.int32),
    )


def run(fn, case_factory, buffers, seed, *, width, decode_reqs=2, tokens_per_req=2,
        prefill_tokens=2):
    case = case_factory(seed, capacity=CAPACITY, width=width, decode_reqs=decode_reqs,
                        tokens_per_req=tokens_per_req, prefill_tokens=prefill_tokens)
    return case, case.call(fn, buffers)


# --------------------------------------------------------------------------- modes


@pytest.mark.parametrize(
    ("text", "mode"),
    [(None, "1"), ("", "1"), ("1", "1"), ("on", "1"), ("TRUE", "1"), ("count", "1"),
     ("0", "0"), ("off", "0"), ("false", "0"), ("no", "0"), ("strict", "strict"),
     (" Strict ", "strict")],
)
def test_parse_mode(text, mode):
    assert guard_mod.parse_mode(text) == mode


def test_parse_mode_refuses_a_misspelt_strict():
    with pytest.raises(ValueError, match="strictt"):
        guard_mod.parse_mode("strictt")


def test_off_returns_the_builder_itself():
    fn = builder("packed", impl="torch")
    assert StrideGuard("0").wrap(fn) is fn


def test_wrapper_keeps_the_builders_name_signature_and_attributes():
    import inspect

    fn = builder("capacity", impl="torch")
    guard = StrideGuard()
    wrapped = guard.wrap(fn)
    assert qualified_name(wrapped) == qualified_name(fn)
    assert wrapped.layout == "capacity" and wrapped.stride_guard is guard
    assert list(inspect.signature(wrapped).parameters) == list(
        inspect.signature(fn).parameters)
    assert guard.wrap(wrapped) is wrapped  # never counts a call twice


# --------------------------------------------------------------------------- counting


def test_packed_violates_at_the_first_batch_narrower_than_capacity(case_factory):
    guard = StrideGuard("1")
    build = guard.wrap(builder("packed", impl="torch"))
    buffers = persistent_buffers()
    run(build, case_factory, buffers, 1, width=CAPACITY)  # capture-like: full width
    run(build, case_factory, buffers, 2, width=CAPACITY)
    # Narrow, but one decode row and one prefill row: row 0 lines up, nothing to see.
    run(build, case_factory, buffers, 3, width=8, decode_reqs=1, tokens_per_req=1,
        prefill_tokens=1)
    assert guard.snapshot()["violations"] == 0
    case, (decode, _, prefill) = run(build, case_factory, buffers, 4, width=8)  # call 4
    run(build, case_factory, buffers, 5, width=16)
    run(build, case_factory, buffers, 6, width=CAPACITY)

    snap = guard.snapshot()
    assert snap["mode"] == "1" and snap["watching"] == qualified_name(builder("packed",
                                                                              impl="torch"))
    assert (snap["calls"], snap["checked"], snap["violations"]) == (6, 5, 2)
    first = snap["first_violation"]
    assert first["call"] == 4
    assert first["views"] == ["decode", "prefill"]
    assert first["num_decode_tokens"] == case.num_decode_tokens == 4
    assert first["num_prefill_tokens"] == case.num_prefill_tokens == 2
    assert first["max_compressed_tokens"] == 8
    assert first["decode_row_stride"] == decode.stride(0) == 8
    assert first["prefill_row_stride"] == prefill.stride(0) == 8
    assert first["decode_buffer_row_stride"] == first["prefill_buffer_row_stride"] == CAPACITY
    assert first["decode_view_shape"] == [4, 8] and first["prefill_view_shape"] == [2, 8]
    assert first["decode_buffer_shape"] == first["prefill_buffer_shape"] == [ROWS, CAPACITY]
    assert first["builder"] == snap["watching"]
    assert first["time"].endswith("Z")


def test_only_the_view_that_leaves_the_stride_is_named(case_factory):
    """A decode-only narrow batch: the prefill view is empty, so only decode is reported."""
    guard = StrideGuard()
    build = guard.wrap(builder("packed", impl="torch"))
    run(build, case_factory, persistent_buffers(), 7, width=4, prefill_tokens=0)
    assert guard.snapshot()["first_violation"]["views"] == ["decode"]


def _random_batches(seed: int, count: int):
    rng = random.Random(seed)
    for i in range(count):
        yield dict(
            seed=1000 + i,
            width=rng.choice([CAPACITY, rng.randint(1, CAPACITY)]),
            decode_reqs=rng.randint(0, 5),
            tokens_per_req=rng.randint(1, 4),
            prefill_tokens=rng.randint(0, 5),
        )


@pytest.mark.parametrize("layout", ["capacity", "prefix", "packed"])
def test_counts_match_an_independent_oracle_over_random_batches(layout, case_factory):
    """capacity and prefix never violate; packed exactly on the narrow multi-row batches."""
    guard = StrideGuard()
    build = guard.wrap(builder(layout, impl="torch"))
    buffers = persistent_buffers()
    expected_checked = expected_packed_violations = 0
    batches = list(_random_batches(52448, 150))
    for b in batches:
        case, _ = run(build, case_factory, buffers, b["seed"], width=b["width"],
                      decode_reqs=b["decode_reqs"], tokens_per_req=b["tokens_per_req"],
                      prefill_tokens=b["prefill_tokens"])
        multi_row = case.num_decode_tokens >= 2 or case.num_prefill_tokens >= 2
        expected_checked += multi_row
        expected_packed_violations += multi_row and b["width"] != CAPACITY
    snap = guard.snapshot()
    assert snap["calls"] == len(batches)
    assert snap["checked"] == expected_checked > 100
    if layout == "packed":
        assert snap["violations"] == expected_packed_violations > 50
    else:
        assert snap["violations"] == 0 and snap["first_violation"] is None


def test_the_first_violation_is_logged_once(case_factory, caplog):
    guard = StrideGuard()
    build = guard.wrap(builder("packed", impl="torch"))
    caplog.set_level(logging.WARNING, logger=guard_mod.logger.name)
    for seed in range(3):
        run(build, case_factory, persistent_buffers(), seed, width=8)
    (record,) = [r for r in caplog.records if r.name == guard_mod.logger.name]
    message = record.getMessage()
    assert message.startswith("dsv4-qual: C128A stride violation at builder call 1")
    assert "decode rows at stride 8" in message and "row stride" in message
    assert "is 32" in message


# --------------------------------------------------------------------------- strict


def test_strict_raises_on_the_first_violation_and_counts_it(case_factory):
    guard = StrideGuard("strict")
    build = guard.wrap(builder("packed", impl="torch"))
    buffers = persistent_buffers()
    run(build, case_factory, buffers, 1, width=CAPACITY)  # full width: fine
    with pytest.raises(StrideViolationError) as raised:
        run(build, case_factory, buffers, 2, width=16)
    assert isinstance(raised.value, RuntimeError)  # vLLM's engine reports it and stops
    message = str(raised.value)
    assert message.startswith("dsv4-qual: C128A stride violation at builder call 2")
    assert "\n" not in message and "max_compressed_tokens=16" in message
    assert raised.value.details["call"] == 2
    assert raised.value.details["decode_row_stride"] == 16
    # Every later violation raises too: a swallowed exception must not let one through.
    with pytest.raises(StrideViolationError) as again:
        run(build, case_factory, buffers, 3, width=8)
    assert again.value.details["call"] == 3
    snap = guard.snapshot()
    assert (snap["calls"], snap["violations"]) == (3, 2)
    assert snap["first_violation"]["call"] == 2


def test_strict_lets_capacity_stride_builders_through(case_factory):
    guard = StrideGuard("strict")
    for layout in ("capacity", "prefix"):
        build = guard.wrap(builder(layout, impl="torch"))
        for seed in range(5):
            run(build, case_factory, persistent_buffers(), seed, width=8)
    assert guard.snapshot()["violations"] == 0


# --------------------------------------------------------------------------- flushing


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_flush_is_immediate_for_the_first_violation_then_throttled(case_factory):
    clock = Clock()
    flushed: list[dict] = []
    guard = StrideGuard(sinks=[flushed.append], flush_interval_s=5.0, clock=clock)
    build = guard.wrap(builder("packed", impl="torch"))
    buffers = persistent_buffers()

    def call(at: float, width: int) -> None:
        clock.now = 100.0 + at
        run(build, case_factory, buffers, int(at * 10), width=width)

    call(0.0, CAPACITY)
    call(4.0, CAPACITY)
    assert flushed == []  # nothing to say yet, and the interval has not passed
    call(4.5, 8)  # the first violation: at once
    assert [(f["calls"], f["violations"]) for f in flushed] == [(3, 1)]
    assert flushed[0]["first_violation"]["call"] == 3
    call(5.0, 8)
    call(9.4, 8)
    assert len(flushed) == 1  # later counts wait for the interval
    call(9.6, CAPACITY)
    assert [(f["calls"], f["violations"]) for f in flushed] == [(3, 1), (6, 3)]
    assert flushed[1]["first_violation"]["call"] == 3
    assert not guard.changed_since_flush()
    call(10.0, CAPACITY)
    assert guard.changed_since_flush()
    guard.flush()
    assert flushed[-1]["calls"] == 7 and not guard.changed_since_flush()


def test_calls_alone_are_flushed_every_interval(case_factory):
    clock = Clock()
    flushed: list[dict] = []
    guard = StrideGuard(sinks=[flushed.append], flush_interval_s=2.0, clock=clock)
    build = guard.wrap(builder("capacity", impl="torch"))
    for step in range(9):  # t = 0, 0.5, ..., 4.0
        clock.now = 100.0 + step * 0.5
        run(build, case_factory, persistent_buffers(), step, width=8)
    assert [(f["calls"], f["violations"]) for f in flushed] == [(5, 0), (9, 0)]


def test_a_failing_sink_never_breaks_the_build(case_factory, caplog):
    def broken(snapshot):
        raise OSError("disk full")

    guard = StrideGuard(sinks=[broken], flush_interval_s=0.0)
    build = guard.wrap(builder("packed", impl="torch"))
    caplog.set_level(logging.WARNING, logger=guard_mod.logger.name)
    for seed in range(3):
        _, (decode, _, _) = run(build, case_factory, persistent_buffers(), seed, width=8)
        assert decode.shape == (4, 8)
    failures = [r for r in caplog.records if "could not report" in r.getMessage()]
    assert len(failures) == 1  # logged once, not per call
    assert guard.snapshot()["violations"] == 3


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="mode"):
        StrideGuard("2")
    with pytest.raises(ValueError, match="flush_interval_s"):
        StrideGuard(flush_interval_s=-1)


# --------------------------------------------------------------------------- no sync, no copy


def _packed_like(positions, compress_ratio, num_decode_tokens, token_to_req_indices,
                 block_table, block_size, slot_mapping, global_decode_buffer,
                 decode_lens_buffer, prefill_buffer, max_compressed_tokens=8192):
    """Upstream 0.27.x's views without its kernel: pure metadata, works on any device."""
    n_pre = positions.shape[0] - num_decode_tokens
    w = max_compressed_tokens
    return (global_decode_buffer.as_strided((num_decode_tokens, w), (w, 1)),
            decode_lens_buffer[:num_decode_tokens],
            prefill_buffer.as_strided((n_pre, w), (w, 1)))


def _meta_call(fn, num_decode=4, num_prefill=3, width=8):
    meta = torch.device("meta")
    tokens = num_decode + num_prefill
    return fn(torch.empty(tokens, dtype=torch.int64, device=meta), 128, num_decode,
              torch.empty(tokens, dtype=torch.int32, device=meta),
              torch.empty(2, 10, dtype=torch.int32, device=meta), 2,
              torch.empty(tokens, dtype=torch.int64, device=meta),
              torch.empty(ROWS, CAPACITY, dtype=torch.int32, device=meta),
              torch.empty(ROWS, dtype=torch.int32, device=meta),
              torch.empty(ROWS, CAPACITY, dtype=torch.int32, device=meta),
              max_compressed_tokens=width)


def test_the_guard_works_on_tensors_without_data():
    """Meta tensors have shapes and strides but no data: any read, copy or sync would raise."""
    guard = StrideGuard("1")
    _meta_call(guard.wrap(_packed_like))
    first = guard.snapshot()["first_violation"]
    assert first["views"] == ["decode", "prefill"]
    assert (first["num_decode_tokens"], first["num_prefill_tokens"]) == (4, 3)
    assert first["decode_row_stride"] == 8 and first["decode_buffer_row_stride"] == CAPACITY


class _Recorder(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.functions: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.functions.append(getattr(func, "__name__", repr(func)))
        return func(*args, **(kwargs or {}))


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("mode", ["1", "strict"])
def test_the_guard_only_reads_strides_shapes_and_dims(mode):
    """No tensor op at all runs on the guard's behalf: no kernel, no copy, no sync."""
    buffers = persistent_buffers()
    returned = (buffers[0][:4], buffers[1][:4], buffers[2][:3])  # capacity views

    def ready_made(*args, **kwargs):
        return returned

    guard = StrideGuard(mode)
    build = guard.wrap(ready_made)
    positions = torch.zeros(7, dtype=torch.int64)
    args = (positions, 128, 4, None, None, 2, None, *buffers)
    with _Recorder() as functions, _Ops() as ops:
        build(*args, max_compressed_tokens=8)
    assert ops.ops == []
    assert set(functions.functions) <= {"stride", "dim", "__get__", "size"}
    assert guard.snapshot()["checked"] == 1


def test_observe_checks_a_call_the_caller_made_itself():
    """For a server that runs its builder its own way (the embedded reference server)."""
    buffers = persistent_buffers()
    packed = (buffers[0].view(-1)[:4 * 8].view(4, 8), buffers[1][:4], buffers[2][:0])
    guard = StrideGuard("strict")
    guard.observe((buffers[0][:4], buffers[1][:4], buffers[2][:0]),
                  positions=torch.zeros(4), num_decode_tokens=4,
                  global_decode_buffer=buffers[0], prefill_buffer=buffers[2],
                  max_compressed_tokens=8, builder="sim")
    with pytest.raises(StrideViolationError, match=r"builder call 2 \(sim\)"):
        guard.observe(packed, positions=torch.zeros(4), num_decode_tokens=4,
                      global_decode_buffer=buffers[0], prefill_buffer=buffers[2],
                      max_compressed_tokens=8, builder="sim")
    assert guard.snapshot()["calls"] == 2
    StrideGuard("0").observe(packed, positions=torch.zeros(4), num_decode_tokens=4,
                             global_decode_buffer=buffers[0], prefill_buffer=buffers[2],
                             max_compressed_tokens=8)  # off: nothing counted, nothing raised
