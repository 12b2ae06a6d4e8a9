"""Upstream vLLM's own ``build_c128a_topk_metadata``, run from a release's files, no vLLM.

The plugin replaces upstream's builder, so upstream's own is the anchor for our time:
same inputs, same GPU, upstream's own Python and Triton kernel. Installing three vLLM
releases on a GPU host to get one function each is not practical, so each release's
blob-pinned ``sparse_mla.py`` (``tests/vllm/upstream_sources.py``) is executed under a
private module name with a stand-in ``vllm`` package in ``sys.modules``:

- what the builder runs per call is real: 0.32.0's JIT-warmup launch objects are the
  release's own files (pinned by blob like ``sparse_mla.py``), ``vllm.triton_utils``
  is Triton itself, ``cdiv`` is arithmetic, and the platform's
  ``get_device_capability`` is a cached classmethod returning
  ``DeviceCapability(major, minor)`` as vLLM's CUDA platforms' is (a cache hit per call);
- everything else the module imports (backends, metadata classes, configs) is only
  declared at import and never called by the builder: an inert stand-in.

``sys.modules`` is restored after loading, so an installed vLLM is neither used nor
disturbed. The correctness of what loads this way is checked against ours by the
benchmark itself (same inputs, same reads) before any timing.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

#: Which upstream release is the anchor for which of our layouts.
RELEASE_OF_LAYOUT: dict[str, str] = {
    "capacity": "0.28.0",  # PR #51318: capacity rows, full width
    "prefix": "0.32.0",  # PR #52823: capacity stride, active-width prefix
    "packed": "0.27.1",  # PR #50004: rows packed at the active width (the bug)
}

SPARSE_MLA = "vllm/models/deepseek_v4/sparse_mla.py"
_REAL_FILES = {
    "vllm/model_executor/warmup/jit_warmup.py": "vllm.model_executor.warmup.jit_warmup",
    "vllm/model_executor/warmup/jit_warmup_triton_helper.py":
        "vllm.model_executor.warmup.jit_warmup_triton_helper",
}


class DeviceCapability(NamedTuple):
    """vLLM's ``vllm.platforms.interface.DeviceCapability`` shape."""

    major: int
    minor: int


class _CudaPlatform:
    """What the builder and the launch helpers read of ``current_platform``."""

    device_type = "cuda"

    @classmethod
    @functools.cache
    def get_device_capability(cls, device_id: int = 0) -> DeviceCapability | None:
        import torch

        if not torch.cuda.is_available():  # vLLM's NVML platform answers None on failure
            return None
        return DeviceCapability(*torch.cuda.get_device_capability(device_id))

    @classmethod
    def is_cuda(cls) -> bool:
        return True


class _InertMeta(type):
    """Classes that can be subclassed, subscripted and read from, and do nothing."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert_class(name)

    def __getitem__(cls, item: Any) -> Any:
        return cls


def _inert_class(name: str) -> type:
    return _InertMeta(name, (), {})


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _inert_class(name)
        setattr(self, name, value)
        return value


class _StandInFinder:
    """Meta-path finder that answers every ``vllm.*`` import with an inert module."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == "vllm" or fullname.startswith("vllm."):
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _InertModule(spec.name)
        module.__path__ = []  # a package: submodules resolve through this finder too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _concrete_modules() -> dict[str, types.ModuleType]:
    """The few ``vllm`` modules whose contents the builder really uses."""
    import triton
    import triton.language as tl

    triton_utils = types.ModuleType("vllm.triton_utils")
    triton_utils.triton, triton_utils.tl, triton_utils.HAS_TRITON = triton, tl, True
    math_utils = types.ModuleType("vllm.utils.math_utils")
    math_utils.cdiv = lambda a, b: -(a // -b)
    platforms = _InertModule("vllm.platforms")
    platforms.__path__ = []
    platforms.current_platform = _CudaPlatform
    interface = _InertModule("vllm.platforms.interface")
    interface.DeviceCapability = DeviceCapability
    envs = types.ModuleType("vllm.envs")
    envs.VLLM_TRITON_JIT_WARMUP_NUM_THREADS = 1
    return {m.__name__: m for m in (triton_utils, math_utils, platforms, interface, envs)}


@contextmanager
def _stand_in_vllm() -> Iterator[None]:
    saved = {name: mod for name, mod in sys.modules.items()
             if name == "vllm" or name.startswith("vllm.")}
    for name in saved:
        del sys.modules[name]
    finder = _StandInFinder()
    sys.meta_path.insert(0, finder)
    sys.modules.update(_concrete_modules())
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
            del sys.modules[name]
        sys.modules.update(saved)


def _exec_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_release(release: str, files: Mapping[str, Path]) -> types.ModuleType:
    """Execute one release's ``sparse_mla.py`` (with its real launch helpers) without vLLM.

    ``files`` maps a path in the wheel to a local, blob-checked copy
    (``upstream_sources.release_files``). The module is kept under a private name,
    ``dsv4_qual_upstream.vllm_<release>.sparse_mla``, so releases never collide.
    """
    with _stand_in_vllm():
        for wheel_path, module_name in _REAL_FILES.items():
            if wheel_path in files:
                _exec_file(module_name, files[wheel_path])
        private = f"dsv4_qual_upstream.vllm_{release.replace('.', '_')}.sparse_mla"
        module = _exec_file(private, files[SPARSE_MLA])
    return module


def load_builder(release: str, files: Mapping[str, Path]) -> Any:
    """Upstream's ``build_c128a_topk_metadata`` of one release (see ``load_release``)."""
    return load_release(release, files).build_c128a_topk_metadata
