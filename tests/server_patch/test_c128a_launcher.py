"""The lean launch path: Triton's launch once per device, then the cached compiled kernel.

Run against a stand-in for a Triton kernel (what ``kernel[grid](...)`` returns and what
its compiled launcher receives are recorded), so the decisions are checked on any
machine; the GPU tests check the real kernel's launches write what Triton's path writes.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

triton = pytest.importorskip("triton")

from server_patch.c128a import launcher as launcher_mod  # noqa: E402
from server_patch.c128a.launcher import CachedLauncher  # noqa: E402

STREAM = 7777


class FakeJit:
    """Records Triton-path launches; returns a compiled kernel that records lean launches."""

    arg_names = ("out_ptr", "stride", "n", "BLOCK")

    def __init__(self) -> None:
        self.triton_launches: list[tuple] = []
        self.lean_launches: list[tuple] = []
        self.compiled = SimpleNamespace(
            run=lambda *a: self.lean_launches.append(a), function="fn-handle",
            packed_metadata="packed")

    def __getitem__(self, grid):
        def launch(*args, **options):
            self.triton_launches.append((grid, args, options))
            return self.compiled
        return launch


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(launcher_mod, "driver", SimpleNamespace(active=SimpleNamespace(
        get_current_device=lambda: 0, get_current_stream=lambda device: STREAM)))
    jit = FakeJit()
    lean = CachedLauncher(jit, tensor_positions=[0], int_positions=[1, 2],
                          options={"BLOCK": 512, "num_warps": 4})
    return jit, lean


def test_first_launch_goes_through_triton_then_the_cached_kernel_directly(fake):
    jit, lean = fake
    out = torch.empty(4, dtype=torch.int32)
    lean.launch(3, 2, out, 8, 5)
    assert jit.triton_launches == [((3, 2), (out, 8, 5), {"BLOCK": 512, "num_warps": 4})]
    lean.launch(4, 1, out, 16, 6)
    # Triton's own launcher call: grid, stream, function, metadata, no hooks, then every
    # parameter in order with the constexprs (BLOCK) last.
    assert jit.lean_launches == [(4, 1, 1, STREAM, "fn-handle", "packed", None, None, None,
                                  out, 16, 6, 512)]
    assert len(jit.triton_launches) == 1
    assert lean.cached_devices() == (0,)


@pytest.mark.parametrize("ints", [(1 << 31, 5), (8, -1)])
def test_integers_triton_would_type_otherwise_take_tritons_path(fake, ints):
    jit, lean = fake
    out = torch.empty(4, dtype=torch.int32)
    lean.launch(1, 1, out, 8, 5)
    lean.launch(1, 1, out, *ints)
    assert len(jit.triton_launches) == 2 and jit.lean_launches == []


def test_another_dtype_takes_tritons_path(fake):
    jit, lean = fake
    lean.launch(1, 1, torch.empty(4, dtype=torch.int32), 8, 5)
    lean.launch(1, 1, torch.empty(4, dtype=torch.int64), 8, 5)
    assert len(jit.triton_launches) == 2 and jit.lean_launches == []


def test_a_registered_launch_hook_sees_launches_through_tritons_path(fake):
    jit, lean = fake
    out = torch.empty(4, dtype=torch.int32)
    lean.launch(1, 1, out, 8, 5)
    hook = lambda metadata: None  # noqa: E731
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        lean.launch(1, 1, out, 8, 5)
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    lean.launch(1, 1, out, 8, 5)
    assert len(jit.triton_launches) == 2 and len(jit.lean_launches) == 1


def test_lean_off_always_takes_tritons_path(fake):
    jit, lean = fake
    out = torch.empty(4, dtype=torch.int32)
    lean.lean = False
    for _ in range(3):
        lean.launch(1, 1, out, 8, 5)
    assert len(jit.triton_launches) == 3 and jit.lean_launches == []


def test_under_the_interpreter_every_launch_is_tritons(fake):
    class InterpretedFunction(FakeJit):
        pass

    jit = InterpretedFunction()
    lean = CachedLauncher(jit, tensor_positions=[0], int_positions=[1, 2],
                          options={"BLOCK": 512})
    out = torch.empty(4, dtype=torch.int32)
    lean.launch(1, 1, out, 8, 5)
    lean.launch(1, 1, out, 8, 5)
    assert len(jit.triton_launches) == 2 and lean.cached_devices() == ()


def test_the_kernels_launcher_covers_every_pointer_and_scalar():
    """Pointers are never specialized on alignment and scalars never on value, so the
    dtypes alone pick the variant the lean path reuses."""
    from server_patch.c128a import kernel

    names = kernel.c128a_metadata_kernel.arg_names
    pointers = {n for n in names if n.endswith("_ptr")}
    assert set(kernel.DO_NOT_SPECIALIZE_ON_ALIGNMENT) == pointers
    jit = triton.runtime.jit.JITFunction(
        kernel._c128a_metadata_kernel, do_not_specialize=kernel.DO_NOT_SPECIALIZE,
        do_not_specialize_on_alignment=kernel.DO_NOT_SPECIALIZE_ON_ALIGNMENT)
    assert all(p.do_not_specialize_on_alignment for p in jit.params if p.name in pointers)
    assert {names[i] for i in kernel.LAUNCHER._tensors} == pointers
    assert {names[i] for i in kernel.LAUNCHER._ints} == set(kernel.DO_NOT_SPECIALIZE)
