"""The builder's public surface: signature, dispatch, identity, specialization, imports."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

import pytest

from server_patch import c128a
from server_patch.c128a import (
    CAPACITY,
    LAYOUTS,
    PACKED,
    PARAMETERS,
    PREFIX,
    builder,
    describe_call,
    observe_first_call,
    qualified_name,
)
from server_patch.c128a import reference as reference_mod

# Written out from the 0.26.0 - 0.33.0 wheels, not derived from our own code.
UPSTREAM_PARAMETERS = [
    "positions",
    "compress_ratio",
    "num_decode_tokens",
    "token_to_req_indices",
    "block_table",
    "block_size",
    "slot_mapping",
    "global_decode_buffer",
    "decode_lens_buffer",
    "prefill_buffer",
    "max_compressed_tokens",
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_builders_have_upstreams_exact_signature(layout):
    for impl in c128a.IMPLS:
        params = inspect.signature(builder(layout, impl=impl)).parameters
        assert list(params) == UPSTREAM_PARAMETERS == list(PARAMETERS)
        assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params.values())
        defaults = {n: p.default for n, p in params.items() if p.default is not p.empty}
        assert defaults == {"max_compressed_tokens": 8192}
        assert inspect.signature(builder(layout, impl=impl)) == c128a.SIGNATURE


def test_wrappers_keep_the_signature_and_pass_arguments_by_name():
    # The one wrapper the observer and the guard share: upstream's signature seen
    # through it, and the hook gets every argument by name, the default filled in.
    seen = []
    fn = c128a.call_through(builder(CAPACITY, impl="torch"),
                            lambda args, kwargs, out: seen.append((args, kwargs)))
    assert inspect.signature(fn) == c128a.SIGNATURE
    assert fn.layout == CAPACITY
    from server_patch.c128a.signature import arguments

    named = arguments(tuple(range(10)), {})
    assert list(named) == UPSTREAM_PARAMETERS
    assert named["max_compressed_tokens"] == 8192
    assert arguments(tuple(range(10)), {"max_compressed_tokens": 128})[
        "max_compressed_tokens"] == 128


def test_the_same_request_returns_the_same_function():
    assert builder(PREFIX) is builder(PREFIX, impl="auto")
    assert builder(PREFIX) is not builder(PACKED)
    assert builder(PREFIX, impl="torch") is not builder(PREFIX)


def test_builders_say_which_layout_they_write():
    fn = builder(PACKED, impl="torch")
    assert (fn.layout, fn.impl) == (PACKED, "torch")
    name = "server_patch.c128a.build_c128a_topk_metadata"
    assert qualified_name(builder(CAPACITY)) == f"{name}[capacity]"
    assert qualified_name(fn) == f"{name}[packed,torch]"


def test_auto_runs_the_torch_reference_for_cpu_tensors(case_factory, monkeypatch):
    calls = []
    original = reference_mod.build
    monkeypatch.setattr(reference_mod, "build", lambda *a: calls.append(1) or original(*a))
    case = case_factory(3)
    case.call(builder(PREFIX), case.buffers())
    assert calls == [1]


def test_kernel_specializes_on_no_runtime_scalar():
    """Every non-pointer, non-constexpr kernel parameter is in do_not_specialize.

    Checked on a compiled-mode JITFunction built from the same Python function,
    so it holds whether or not this process runs the interpreter.
    """
    triton = pytest.importorskip("triton")
    from server_patch.c128a import kernel

    raw = kernel._c128a_metadata_kernel
    scalars = {
        name
        for name, p in inspect.signature(raw).parameters.items()
        if not name.endswith("_ptr") and "constexpr" not in str(p.annotation)
    }
    assert scalars == set(kernel.DO_NOT_SPECIALIZE)
    jit = triton.runtime.jit.JITFunction(raw, do_not_specialize=kernel.DO_NOT_SPECIALIZE)
    flags = {p.name: p.do_not_specialize for p in jit.params}
    assert all(flags[name] for name in scalars)
    assert not any(flags[name] for name in flags if name.endswith("_ptr"))


def test_triton_impl_on_cpu_without_the_interpreter_says_what_to_do(case_factory, monkeypatch):
    pytest.importorskip("triton")
    from server_patch.c128a import kernel

    monkeypatch.setattr(kernel, "is_interpreted", lambda: False)
    case = case_factory(4)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        case.call(builder(PREFIX, impl="triton"), case.buffers())


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


def test_importing_server_patch_imports_neither_vllm_nor_loadgen_nor_triton():
    result = _run_python(
        """
        import sys
        import server_patch, server_patch.c128a, server_patch.plugin, server_patch.receipts
        import server_patch.vllm_compat, server_patch.settings
        bad = [m for m in ("vllm", "loadgen", "triton") if m in sys.modules]
        print(bad)
        sys.exit(1 if bad else 0)
        """
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_builder_works_without_triton_installed():
    result = _run_python(
        """
        import sys
        sys.modules["triton"] = None  # as if not installed: "import triton" raises ImportError
        import torch
        from server_patch.c128a import builder
        g = torch.full((4, 8), -5, dtype=torch.int32)
        lens = torch.zeros(4, dtype=torch.int32)
        p = torch.full((4, 8), -5, dtype=torch.int32)
        pos = torch.tensor([300, 700, 400, 900])
        out = builder("capacity")(pos, 128, 2, torch.tensor([0, 1, 2, 2], dtype=torch.int32),
                                  torch.arange(10, dtype=torch.int32).view(2, 5), 2,
                                  torch.tensor([1, 2, 3, 4]), g, lens, p, 8)
        assert out[1].tolist() == [2, 5], out[1]
        try:
            builder("capacity", impl="triton")
        except ImportError:
            print("triton impl refused")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "triton impl refused" in result.stdout


def test_observer_reports_the_first_call_once(case_factory):
    seen = []
    fn = observe_first_call(builder(PREFIX, impl="torch"), seen.append)
    assert list(inspect.signature(fn).parameters) == list(PARAMETERS)
    assert fn.layout == PREFIX
    case = case_factory(8, capacity=32, width=16)
    buffers = case.buffers()
    first = case.call(fn, buffers)
    case.call(fn, case.buffers())
    assert len(seen) == 1
    info = seen[0]
    assert info["row_stride_decode"] == info["row_stride_prefill"] == 32
    assert info["width"] == 16
    assert info["decode_buffer_shape"] == info["prefill_buffer_shape"] == [case.rows, 32]
    assert info["num_decode_tokens"] == case.num_decode_tokens
    assert info["num_prefill_tokens"] == case.num_prefill_tokens
    assert info["impl"] == "torch" and info["layout"] == PREFIX
    assert info["time"].endswith("Z")
    assert first[0].shape == (case.num_decode_tokens, 16)


def test_describe_call_reports_packed_and_capacity_strides(case_factory):
    case = case_factory(8, capacity=32, width=16)
    for layout, stride, width in ((PACKED, 16, 16), (CAPACITY, 32, 32)):
        fn = builder(layout, impl="torch")
        buffers = case.buffers()
        returned = case.call(fn, buffers)
        info = describe_call(fn, case.positions, case.num_decode_tokens, buffers[0], buffers[2],
                             returned, case.width)
        assert (info["row_stride_decode"], info["width"]) == (stride, width)


def test_observer_never_breaks_the_build(case_factory, caplog):
    def broken(info):
        raise RuntimeError("disk full")

    fn = observe_first_call(builder(CAPACITY, impl="torch"), broken)
    case = case_factory(9)
    decode, _, _ = case.call(fn, case.buffers())
    assert decode.shape[0] == case.num_decode_tokens
    assert "could not record" in caplog.text

