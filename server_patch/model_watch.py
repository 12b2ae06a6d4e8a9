"""Which processes run the model, and whether it has C128A layers: the receipt's `model` section.

A release gate that requires receipts must hear from the processes that build C128A
metadata (the engine's model-running workers), not only from the API server, and it
must tell a model without C128A layers (DeepSeek-V4.1: compress ratios 1 and 2
only) from a C128A builder that was never reached. Two hooks, installed by the
plugin in every process, write what they see into that process's receipt:

- ``loaded``: this process loaded the model. vLLM's model loaders (0.26 - 0.34) go
  through ``BaseModelLoader.load_model``; the hook records each load once it returns
  (``loads``: the target model, then a speculative drafter in the same process, e.g.
  DeepSeek-V4's ``DeepSeekV4MTPModel``). The section's ``architectures`` are every
  load's, ``compress_ratios`` the attention compress ratios their configs declare
  (DeepSeek-V4's C128A layers have ratio 128, V4.1's have 1 and 2 only, None: no such
  key), and ``model``, ``revision``, ``model_type`` and ``parallel`` (this process's
  data-parallel rank and size, worker rank and world size, so that the gate can tell
  whether every rank of a server start wrote a receipt) are the target model's;
  ``device`` is the GPU the process runs it on (name and UUID from torch, the driver
  from NVML), so that a history can say which GPUs and driver a round ran on (absent
  where the process has no CUDA device; never guessed).
- ``c128a_builders``: how many DeepSeek-V4 sparse-MLA metadata builders with
  compress ratio 128 this process made (one per C128A KV-cache group), and their
  capacity widths. The hook wraps ``__init__`` of the target module's classes that
  define ``_build_c128a_metadata`` themselves (0.26/0.27:
  ``DeepseekV4FlashMLAMetadataBuilder``; 0.28+: ``DeepseekV4SparseMLAMetadataBuilder``).

A process that loaded a model and made no C128A builder runs a model without C128A
layers. A hook that cannot be installed says so in ``hooks``; the gate then cannot
identify the model processes and makes the run invalid rather than guess. The hooks
never raise into vLLM: what they cannot record, they log.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from server_patch.receipts import utc_now

logger = logging.getLogger("vllm.plugins.dsv4_qual")

#: The receipt section this module writes.
SECTION = "model"
#: Where every vLLM model loader passes (module, class, method).
MODEL_LOADER = ("vllm.model_executor.model_loader.base_loader", "BaseModelLoader", "load_model")
#: A builder class of the target module is a C128A one when it defines this itself.
C128A_METHOD = "_build_c128a_metadata"
C128A_RATIO = 128
_MARK = "_dsv4_qual_model_watch"

Report = Callable[[dict[str, Any]], None]


class _Seen:
    """This process's observations (a forked child starts from nothing)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.loads: list[dict[str, Any]] = []
        self.c128a_builders = 0
        self.c128a_widths: list[int] = []
        self.hooks: dict[str, str] = {}


_SEEN = _Seen()
_report: Report | None = None
os.register_at_fork(after_in_child=_SEEN.reset)


def _merged(loads: list[dict[str, Any]]) -> dict[str, Any]:
    """The target model's facts (the first load), with every load's architectures and
    compress ratios."""
    if not loads:
        return {}
    first = loads[0]
    architectures = list(dict.fromkeys(a for load in loads for a in load["architectures"]))
    ratios = [load["compress_ratios"] for load in loads if load["compress_ratios"] is not None]
    return {
        "architectures": architectures,
        "model_type": first["model_type"],
        "model": first["model"],
        "revision": first["revision"],
        "compress_ratios": sorted({r for found in ratios for r in found}) if ratios else None,
        "parallel": first["parallel"],
        "device": first.get("device"),
        "loaded_at": first["loaded_at"],
        "loads": [{k: v for k, v in load.items()
                   if k not in ("parallel", "device")} for load in loads],
    }


def section() -> dict[str, Any]:
    """What the receipt's `model` section holds now."""
    with _SEEN.lock:
        return {
            "loaded": bool(_SEEN.loads),
            **_merged(_SEEN.loads),
            "c128a_builders": _SEEN.c128a_builders,
            "c128a_widths": sorted(set(_SEEN.c128a_widths)),
            "hooks": dict(_SEEN.hooks),
        }


def _publish() -> None:
    report = _report
    if report is None:
        return
    try:
        report(section())
    except Exception:
        logger.warning("dsv4-qual: could not write the receipt's model section", exc_info=True)


#: What the receipt keeps of vLLM's ParallelConfig (0.26 - 0.34 names).
PARALLEL_FIELDS = ("data_parallel_size", "data_parallel_size_local", "data_parallel_rank",
                   "data_parallel_index", "data_parallel_external_lb",
                   "data_parallel_hybrid_lb", "world_size", "rank", "tensor_parallel_size",
                   "pipeline_parallel_size", "nnodes", "node_rank")


def _parallel(vllm_config: Any) -> dict[str, Any] | None:
    """This process's place in the server: its data-parallel rank and its worker rank.

    ``data_parallel_index`` is the engine's rank even where vLLM runs a dense model's
    ranks as independent servers of size 1; None where vLLM has no such field.
    """
    config = getattr(vllm_config, "parallel_config", None)
    if config is None:
        return None
    found = {}
    for name in PARALLEL_FIELDS:
        value = getattr(config, name, None)
        found[name] = value if isinstance(value, bool | int) else None
    return found


def _compress_ratios(model_config: Any) -> list[int] | None:
    """The attention compress ratios the model's config declares (None: no such key)."""
    for config in (getattr(model_config, "hf_text_config", None),
                   getattr(model_config, "hf_config", None)):
        ratios = getattr(config, "compress_ratios", None)
        if isinstance(ratios, list | tuple):
            return sorted({int(r) for r in ratios if isinstance(r, int | float)})
    return None


def _describe_model(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    vllm_config = kwargs.get("vllm_config", args[0] if args else None)
    model_config = kwargs.get("model_config", args[1] if len(args) > 1 else None)
    if model_config is None and vllm_config is not None:
        model_config = getattr(vllm_config, "model_config", None)
    hf_config = getattr(model_config, "hf_config", None)
    revision = getattr(model_config, "revision", None)
    return {
        "architectures": [str(a) for a in getattr(hf_config, "architectures", None) or []],
        "model_type": getattr(hf_config, "model_type", None),
        "model": str(getattr(model_config, "model", "") or ""),
        "revision": revision if isinstance(revision, str) else None,
        "compress_ratios": _compress_ratios(model_config),
        "parallel": _parallel(vllm_config),
        "device": _device(),
        "loaded_at": utc_now(),
    }


def _device() -> dict[str, Any] | None:
    """The CUDA device this process loaded the model on, or None (no CUDA, no torch).

    Read after the load, when the worker has its device: torch names it (and its UUID,
    so that a server's GPUs can be counted across its workers); NVML, which vLLM
    installs, gives the driver release. Whatever cannot be read is left out."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        found: dict[str, Any] = {"name": str(props.name),
                                 "uuid": str(getattr(props, "uuid", "") or "") or None,
                                 "driver": None}
    except Exception as err:  # never raise into vLLM's loader
        logger.debug("dsv4-qual: no CUDA device to record: %s", err)
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        found["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
    except Exception as err:
        logger.debug("dsv4-qual: no NVML driver version: %s", err)
    return found


def _hook_model_loader() -> str:
    module_name, class_name, method = MODEL_LOADER
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
        original = getattr(cls, method)
    except Exception as err:
        return f"cannot hook {module_name}.{class_name}.{method}: {type(err).__name__}: {err}"
    if getattr(original, _MARK, False):
        return "ok"

    @functools.wraps(original)
    def load_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        model = original(self, *args, **kwargs)
        try:
            described = _describe_model(args, kwargs)
            with _SEEN.lock:
                _SEEN.loads.append(described)
            _publish()
        except Exception:
            logger.warning("dsv4-qual: could not record the model load", exc_info=True)
        return model

    setattr(load_model, _MARK, True)
    setattr(cls, method, load_model)
    return "ok"


def c128a_builder_classes(module: ModuleType) -> list[type]:
    """The target module's classes that define the C128A metadata step (and __init__) themselves."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and obj.__module__ == module.__name__
            and C128A_METHOD in vars(obj) and "__init__" in vars(obj)]


def _hook_c128a_builders(module: ModuleType) -> str:
    classes = c128a_builder_classes(module)
    if not classes:
        return f"no class in {module.__name__} defines {C128A_METHOD}"
    for cls in classes:
        original = vars(cls)["__init__"]
        if getattr(original, _MARK, False):
            continue
        cls.__init__ = _counting_init(original)  # type: ignore[misc]
    return "ok"


def _counting_init(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            if getattr(self, "compress_ratio", None) == C128A_RATIO:
                with _SEEN.lock:
                    _SEEN.c128a_builders += 1
                    width = getattr(self, "c128a_max_compressed", None)
                    if isinstance(width, int):
                        _SEEN.c128a_widths.append(width)
                _publish()
        except Exception:
            logger.warning("dsv4-qual: could not count a C128A metadata builder", exc_info=True)

    setattr(__init__, _MARK, True)
    return __init__


def install(target_module: ModuleType | None, report: Report) -> dict[str, Any]:
    """Install both hooks (again: idempotent) and report into `report`; the section."""
    global _report
    _report = report
    hooks = {"model_loader": _hook_model_loader()}
    hooks["c128a_builders"] = (_hook_c128a_builders(target_module) if target_module is not None
                               else "the patch target module could not be imported")
    with _SEEN.lock:
        _SEEN.hooks = hooks
    for name, status in hooks.items():
        if status != "ok":
            logger.warning("dsv4-qual: %s hook not installed: %s", name, status)
    return section()
