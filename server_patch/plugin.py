"""The ``vllm.general_plugins`` entry point: patch vLLM's C128A builder.

vLLM calls ``register()`` with no arguments in every process it starts (API
server, engine core, each worker), before the model's attention builders
exist. We replace the module global
``vllm.models.deepseek_v4.sparse_mla.build_c128a_topk_metadata``, which vLLM
looks up by name on every metadata build, with our builder for the chosen
layout, and leave a receipt.

Why a failure is a ``SystemExit`` and not an ``Exception``: vLLM imports each
plugin inside ``try: ... except Exception: logger.exception(...)`` and goes on
without it, and a server that silently runs the unpatched (possibly packed)
builder is exactly what strict mode exists to prevent. ``SystemExit`` is a
``BaseException``: no ``except Exception`` on the way swallows it (the plugin
loader, ``EngineCore``'s startup handler, ``WorkerProc.worker_main``, which
re-raises it explicitly), so the process stops, printing our one-line message,
and vLLM's process monitors turn a dead engine core or worker into a failed
startup. Checks run in ``register()``, never at import: an import error would
be swallowed by the loader.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from server_patch import settings as settings_mod
from server_patch import vllm_compat
from server_patch.c128a import builder, observe_first_call, qualified_name
from server_patch.receipts import Receipt, process_title

# A child of vLLM's logger, so the line goes through vLLM's handler and level
# (vLLM configures "vllm" and does not propagate it to the root logger).
logger = logging.getLogger("vllm.plugins.dsv4_qual")

_MARK_LAYOUT = "_dsv4_qual_layout"
_MARK_UPSTREAM = "_dsv4_qual_upstream"


class FatalPluginError(SystemExit):
    """Stops the process: strict mode found a vLLM we cannot vouch for.

    Subclasses ``SystemExit`` so that vLLM's ``except Exception`` handlers
    cannot swallow it; its text (the exit "code") is printed on stderr.
    """


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    receipt: Receipt | None = None
    registrations: int = 0
    announced_off: bool = False


_STATE = _State()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fatal(message: str) -> NoReturn:
    message = _one_line(message)
    logger.error(message)
    raise FatalPluginError(message)


def _import_target() -> tuple[ModuleType | None, str | None]:
    try:
        return importlib.import_module(vllm_compat.TARGET_MODULE), None
    except Exception as err:
        return None, f"cannot import {vllm_compat.TARGET_MODULE}: {type(err).__name__}: {err}"


def _record_first_call(info: dict[str, Any]) -> None:
    receipt = _STATE.receipt
    if receipt is None:
        return
    receipt.update(first_call=info, process=process_title())


def _ensure_receipt(receipt_dir: str | None, fields: dict[str, Any]) -> None:
    """Create or update this process's receipt; a write failure is logged, not fatal.

    The load generator's gate reports a missing receipt, which is the right
    place for that failure; the server itself keeps serving.
    """
    if receipt_dir is None:
        return
    try:
        receipt = _STATE.receipt
        if receipt is None or receipt.directory != Path(receipt_dir):
            receipt = Receipt(receipt_dir, {"first_call": None, **fields})
            _STATE.receipt = receipt
        path = receipt.update(**fields)
        logger.debug("dsv4-qual: receipt %s", path)
    except OSError as err:
        logger.warning("dsv4-qual: could not write the patch receipt in %s: %s", receipt_dir, err)


def register() -> None:
    """Entry point for ``vllm.general_plugins``; safe to call any number of times per process."""
    with _STATE.lock:
        _STATE.registrations += 1
        _register()


def _register() -> None:
    strict = settings_mod.strict_from_env()
    receipt_dir = os.environ.get(settings_mod.ENV_RECEIPT_DIR, "").strip() or None
    requested_layout = os.environ.get(settings_mod.ENV_LAYOUT, settings_mod.DEFAULT_LAYOUT)
    fields: dict[str, Any] = {
        "layout": requested_layout,
        "patched": False,
        "strict": strict,
        "vllm_version": None,
        "upstream_variant": vllm_compat.UNKNOWN,
        "supported_vllm": None,
        "target": vllm_compat.TARGET,
        "installed": None,
        "warnings": [],
        "error": None,
    }

    def refuse(message: str) -> None:
        """Strict: write the receipt, then stop the process. Relaxed: warn, leave vLLM alone."""
        message = _one_line(f"dsv4-qual: {message}")
        if strict:
            _ensure_receipt(receipt_dir, {**fields, "error": message})
            _fatal(message)
        logger.warning("%s (DSV4_QUAL_STRICT=0: leaving vLLM's builder in place)", message)
        _ensure_receipt(receipt_dir, {**fields, "error": message})

    try:
        settings = settings_mod.Settings.from_env()
    except settings_mod.SettingsError as err:
        refuse(str(err))
        return
    fields.update(layout=settings.layout, supported_vllm=settings.supported_vllm)

    version = vllm_compat.installed_vllm_version()
    fields.update(vllm_version=version, upstream_variant=vllm_compat.upstream_variant(version))

    module, import_problem = _import_target()
    current = getattr(module, vllm_compat.TARGET_ATTRIBUTE, None) if module else None
    upstream = getattr(current, _MARK_UPSTREAM, current)
    if upstream is not None:
        fields["installed"] = qualified_name(current)

    version_problem = None
    if version is None:
        version_problem = "cannot determine the installed vLLM version"
    elif not vllm_compat.is_supported(version, settings.supported_vllm):
        version_problem = (
            f"vLLM {version} is not in the supported range {settings.supported_vllm} "
            f"(set {settings_mod.ENV_SUPPORTED_VLLM} to override after checking the target)"
        )
    target_problem = import_problem or vllm_compat.signature_problem(upstream)

    if target_problem:
        refuse(target_problem if not version_problem else f"{version_problem}; {target_problem}")
        return
    if version_problem:
        if strict:
            refuse(version_problem)
        message = f"dsv4-qual: {version_problem}; patching anyway (DSV4_QUAL_STRICT=0)"
        logger.warning("%s", message)
        fields["warnings"].append(message)

    assert module is not None and upstream is not None
    if settings.layout == settings_mod.OFF:
        if current is not upstream:
            setattr(module, vllm_compat.TARGET_ATTRIBUTE, upstream)
            _STATE.announced_off = False
        if not _STATE.announced_off:
            _STATE.announced_off = True
            logger.info(
                "dsv4-qual: layout off; vLLM's own %s stays in place (vLLM %s, builder %s, pid %d)",
                vllm_compat.TARGET,
                version,
                fields["upstream_variant"],
                os.getpid(),
            )
        fields["installed"] = qualified_name(upstream)
        _ensure_receipt(receipt_dir, fields)
        return

    if getattr(current, _MARK_LAYOUT, None) != settings.layout:
        replacement = observe_first_call(builder(settings.layout), _record_first_call)
        setattr(replacement, _MARK_LAYOUT, settings.layout)
        setattr(replacement, _MARK_UPSTREAM, upstream)
        setattr(module, vllm_compat.TARGET_ATTRIBUTE, replacement)
        current = replacement
        logger.info(
            "dsv4-qual: patched %s -> %s (layout %s, vLLM %s whose own builder is %s, pid %d)",
            vllm_compat.TARGET,
            qualified_name(replacement),
            settings.layout,
            version,
            fields["upstream_variant"],
            os.getpid(),
        )
    fields.update(patched=True, installed=qualified_name(current))
    _ensure_receipt(receipt_dir, fields)
