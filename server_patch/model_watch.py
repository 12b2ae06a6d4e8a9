"""Which processes run the model, and whether it has C128A layers: the receipt's `model` section.

A release gate that requires receipts must hear from the processes that build C128A
metadata (the engine's model-running workers), not only from the API server, and it
must tell a model without C128A layers (DeepSeek-V4.1: compress ratios 1 and 2
only) from a C128A builder that was never reached. Two hooks, installed by the
plugin in every process, write what they see into that process's receipt:

- ``loaded``: this process loaded the model. vLLM's model loaders (0.26 - 0.33) go
  through ``BaseModelLoader.load_model``; the hook records the architectures, the
  model type and the model's name once it returns.
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
        self.loaded: dict[str, Any] | None = None
        self.c128a_builders = 0
        self.c128a_widths: list[int] = []
        self.hooks: dict[str, str] = {}


_SEEN = _Seen()
_report: Report | None = None
os.register_at_fork(after_in_child=_SEEN.reset)


def section() -> dict[str, Any]:
    """What the receipt's `model` section holds now."""
    with _SEEN.lock:
        loaded = _SEEN.loaded
        return {
            "loaded": loaded is not None,
            **(loaded or {}),
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


def _describe_model(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    vllm_config = kwargs.get("vllm_config", args[0] if args else None)
    model_config = kwargs.get("model_config", args[1] if len(args) > 1 else None)
    if model_config is None and vllm_config is not None:
        model_config = getattr(vllm_config, "model_config", None)
    hf_config = getattr(model_config, "hf_config", None)
    return {
        "architectures": list(getattr(hf_config, "architectures", None) or []),
        "model_type": getattr(hf_config, "model_type", None),
        "model": str(getattr(model_config, "model", "") or ""),
        "loaded_at": utc_now(),
    }


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
                _SEEN.loaded = described
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
