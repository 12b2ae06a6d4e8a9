"""The ``vllm.general_plugins`` entry point: patch vLLM's C128A builder.

vLLM calls ``register()`` with no arguments in every process it starts (API
server, engine core, each worker), before the model's attention builders
exist. We replace the module global
``vllm.models.deepseek_v4.sparse_mla.build_c128a_topk_metadata``, which vLLM
looks up by name on every metadata build, with our builder for the chosen
layout, arm the compile of our kernel for when the process starts CUDA
(``c128a.warmup``, as vLLM 0.30+ warms its own up), watch for the model's load
and its C128A metadata builders (``model_watch``), and leave a receipt that names the
server start it belongs to (``server_start``: an id the first process of a start makes
and hands down, which the API server also exports on /metrics).
Under every layout, ``off`` included, the stride guard (``server_patch.guard``,
``DSV4_QUAL_GUARD``, counting by default) wraps whatever is in place, so even
upstream's own builder is watched and the receipt's ``guard`` section says what it saw.

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

from server_patch import guard as guard_mod
from server_patch import model_watch, server_start, vllm_compat
from server_patch import settings as settings_mod
from server_patch.c128a import builder, observe_first_call, qualified_name
from server_patch.c128a.layouts import expected_violations
from server_patch.c128a.warmup import warm_up_when_cuda_starts
from server_patch.guard import StrideGuard
from server_patch.guard_sinks import standard_sinks
from server_patch.receipts import Receipt, process_title

# A child of vLLM's logger, so the line goes through vLLM's handler and level
# (vLLM configures "vllm" and does not propagate it to the root logger).
logger = logging.getLogger("vllm.plugins.dsv4_qual")

_MARK_LAYOUT = "_dsv4_qual_layout"
_MARK_UPSTREAM = "_dsv4_qual_upstream"
_MARK_GUARD = "_dsv4_qual_guard"


class FatalPluginError(SystemExit):
    """Stops the process: strict mode found a vLLM we cannot vouch for.

    Subclasses ``SystemExit`` so that vLLM's ``except Exception`` handlers
    cannot swallow it; its text (the exit "code") is printed on stderr.
    """


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    receipt: Receipt | None = None
    guard: StrideGuard | None = None
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


def _current_receipt() -> Receipt | None:
    return _STATE.receipt


def _record_model(section: dict[str, Any]) -> None:
    """The model watch's findings (model loaded, C128A builders made) into the receipt."""
    receipt = _STATE.receipt
    if receipt is not None:
        receipt.merge_section(model_watch.SECTION, section)


def _ensure_guard(settings: settings_mod.Settings) -> StrideGuard:
    """This process's stride guard (one per process; a new one only if its settings change).

    It watches whatever builder is installed, ours or upstream's, and reports
    into this process's receipt (and Prometheus counters, where importable),
    at the first violation, every few seconds, and at exit.
    """
    guard = _STATE.guard
    expected = expected_violations(settings.layout, "this server")
    if (
        guard is None
        or guard.mode != settings.guard
        or guard.flush_interval_s != settings.guard_flush_s
        or guard.expected != expected
    ):
        guard = StrideGuard(
            settings.guard,
            sinks=standard_sinks(_current_receipt) if settings.guard != guard_mod.OFF else (),
            flush_interval_s=settings.guard_flush_s,
            flush_at_exit=True,
            log=logger,
            expected=expected,
        )
        _STATE.guard = guard
    return guard


def _mark(fn: Any, layout: str, upstream: Any, guard: StrideGuard) -> None:
    setattr(fn, _MARK_LAYOUT, layout)
    setattr(fn, _MARK_UPSTREAM, upstream)
    setattr(fn, _MARK_GUARD, guard)


def _in_place(current: Any, layout: str, guard: StrideGuard) -> bool:
    return getattr(current, _MARK_LAYOUT, None) == layout and (
        getattr(current, _MARK_GUARD, None) is guard
    )


def register() -> None:
    """Entry point for ``vllm.general_plugins``; safe to call any number of times per process."""
    with _STATE.lock:
        _STATE.registrations += 1
        _register()


@dataclass
class _Target:
    """What this process's vLLM offers at the patch point."""

    version: str | None
    module: ModuleType | None
    current: Any  # the function in place now (possibly ours)
    upstream: Any  # vLLM's own function (what ours replaced, if anything)
    version_problem: str | None
    target_problem: str | None


def _inspect_target(supported: str) -> _Target:
    version = vllm_compat.installed_vllm_version()
    if version is None:
        version_problem = "cannot determine the installed vLLM version"
    elif not vllm_compat.is_supported(version, supported):
        version_problem = (
            f"vLLM {version} is not in the supported range {supported} "
            f"(set {settings_mod.ENV_SUPPORTED_VLLM} to override after checking the target)"
        )
    else:
        version_problem = None
    module, import_problem = _import_target()
    current = getattr(module, vllm_compat.TARGET_ATTRIBUTE, None) if module else None
    upstream = getattr(current, _MARK_UPSTREAM, current)
    return _Target(
        version=version,
        module=module,
        current=current,
        upstream=upstream,
        version_problem=version_problem,
        target_problem=import_problem or vllm_compat.signature_problem(upstream),
    )


def _install(target: _Target, layout: str, upstream_variant: str, guard: StrideGuard) -> Any:
    """Put our builder for ``layout`` in place, under the guard (unless it already is);
    return what is in place."""
    if _in_place(target.current, layout, guard):
        return target.current
    replacement = guard.wrap(observe_first_call(builder(layout), _record_first_call))
    _mark(replacement, layout, target.upstream, guard)
    setattr(target.module, vllm_compat.TARGET_ATTRIBUTE, replacement)
    # Our kernel replaces upstream's, so it replaces upstream's start-up JIT warm-up too.
    warm_up_when_cuda_starts(logger)
    logger.info(
        "dsv4-qual: patched %s -> %s (layout %s, vLLM %s whose own builder is %s, "
        "stride guard %s, pid %d)",
        vllm_compat.TARGET,
        qualified_name(replacement),
        layout,
        target.version,
        upstream_variant,
        guard.mode,
        os.getpid(),
    )
    return replacement


def _leave_upstream(target: _Target, upstream_variant: str, guard: StrideGuard) -> None:
    """Layout ``off``: upstream's function in place (put back if ours was installed),
    under the guard when it is on, so the guard can watch upstream's own builder."""
    off = settings_mod.OFF
    if guard.enabled and not _in_place(target.current, off, guard):
        watched = guard.wrap(target.upstream)
        _mark(watched, off, target.upstream, guard)
        setattr(target.module, vllm_compat.TARGET_ATTRIBUTE, watched)
        _STATE.announced_off = False
    elif not guard.enabled and target.current is not target.upstream:
        setattr(target.module, vllm_compat.TARGET_ATTRIBUTE, target.upstream)
        _STATE.announced_off = False
    if not _STATE.announced_off:
        _STATE.announced_off = True
        logger.info(
            "dsv4-qual: layout off; vLLM's own %s stays in place (vLLM %s, builder %s, "
            "stride guard %s, pid %d)",
            vllm_compat.TARGET,
            target.version,
            upstream_variant,
            guard.mode,
            os.getpid(),
        )


def _register() -> None:
    strict = settings_mod.strict_from_env()
    receipt_dir = os.environ.get(settings_mod.ENV_RECEIPT_DIR, "").strip() or None
    # First, before anything can stop the process: which start this is, on /metrics too,
    # so that even a refusal's receipt says whose it is.
    start = server_start.current()
    server_start.export_metric(start, logger)
    fields: dict[str, Any] = {
        server_start.SECTION: start.section(),
        "layout": os.environ.get(settings_mod.ENV_LAYOUT, settings_mod.DEFAULT_LAYOUT),
        "patched": False,
        "strict": strict,
        "vllm_version": None,
        "upstream_variant": vllm_compat.UNKNOWN,
        "supported_vllm": None,
        "target": vllm_compat.TARGET,
        "installed": None,
        "warnings": [],
        "error": None,
        "registrations": _STATE.registrations,
    }

    def refuse(message: str) -> None:
        """Strict: write the receipt, then stop the process. Relaxed: warn, leave vLLM alone."""
        message = _one_line(f"dsv4-qual: {message}")
        _ensure_receipt(receipt_dir, {**fields, "error": message})
        if strict:
            _fatal(message)
        logger.warning("%s (DSV4_QUAL_STRICT=0: leaving vLLM's builder in place)", message)

    try:
        settings = settings_mod.Settings.from_env()
    except settings_mod.SettingsError as err:
        refuse(str(err))
        return
    guard = _ensure_guard(settings)
    target = _inspect_target(settings.supported_vllm)
    variant = vllm_compat.upstream_variant(target.version)
    fields.update(
        layout=settings.layout,
        supported_vllm=settings.supported_vllm,
        vllm_version=target.version,
        upstream_variant=variant,
        installed=qualified_name(target.current) if target.current is not None else None,
    )

    if target.target_problem:
        problems = [p for p in (target.version_problem, target.target_problem) if p]
        refuse("; ".join(problems))
        return
    if target.version_problem:
        if strict:
            refuse(target.version_problem)
        message = f"dsv4-qual: {target.version_problem}; patching anyway (DSV4_QUAL_STRICT=0)"
        logger.warning("%s", message)
        fields["warnings"].append(message)

    if settings.layout == settings_mod.OFF:
        _leave_upstream(target, variant, guard)
        fields["installed"] = qualified_name(target.upstream)
    else:
        installed = _install(target, settings.layout, variant, guard)
        fields.update(patched=True, installed=qualified_name(installed))
    fields["guard"] = guard.snapshot()
    # Which process runs the model, and whether its model has C128A layers: what the
    # gate needs to know whose receipt proves what.
    fields[model_watch.SECTION] = model_watch.install(target.module, _record_model)
    _ensure_receipt(receipt_dir, fields)
