"""The plugin's environment settings, parsed once and validated.

vLLM calls a general plugin with no arguments, in every process it starts, so
the environment is the only way to configure it (and it is inherited by every
engine and worker process).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from server_patch import guard as guard_mod
from server_patch.c128a.layouts import LAYOUTS
from server_patch.vllm_compat import DEFAULT_SUPPORTED, parse_specifier

ENV_LAYOUT = "DSV4_QUAL_C128A_LAYOUT"
ENV_STRICT = "DSV4_QUAL_STRICT"
ENV_RECEIPT_DIR = "DSV4_QUAL_RECEIPT_DIR"
ENV_SUPPORTED_VLLM = "DSV4_QUAL_SUPPORTED_VLLM"
ENV_GUARD = "DSV4_QUAL_GUARD"
ENV_GUARD_FLUSH_S = "DSV4_QUAL_GUARD_FLUSH_S"

OFF = "off"
DEFAULT_LAYOUT = "capacity"
#: What ``DSV4_QUAL_C128A_LAYOUT`` accepts: a builder layout, or ``off``.
LAYOUT_CHOICES: tuple[str, ...] = (*LAYOUTS, OFF)
#: The stride guard counts by default: it only reads tensor metadata, never
#: changes what the builder returns, and is the cheapest way to see a builder
#: that packs rows (see server_patch/guard.py). ``0`` turns it off.
DEFAULT_GUARD = guard_mod.COUNT

_FALSE = frozenset({"0", "false", "no", "off"})
_TRUE = frozenset({"", "1", "true", "yes", "on"})


class SettingsError(ValueError):
    """An environment value the plugin cannot act on."""


def strict_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Strict mode unless ``DSV4_QUAL_STRICT`` says off; an unreadable value stays strict.

    Kept separate from ``Settings.from_env`` so that even a settings error is
    handled with the right strictness.
    """
    environ = os.environ if environ is None else environ
    return environ.get(ENV_STRICT, "1").strip().lower() not in _FALSE


@dataclass(frozen=True)
class Settings:
    layout: str
    strict: bool
    receipt_dir: str | None
    supported_vllm: str
    guard: str = DEFAULT_GUARD
    guard_flush_s: float = guard_mod.DEFAULT_FLUSH_INTERVAL_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        environ = os.environ if environ is None else environ
        layout = environ.get(ENV_LAYOUT, DEFAULT_LAYOUT).strip().lower() or DEFAULT_LAYOUT
        if layout not in LAYOUT_CHOICES:
            choices = ", ".join(LAYOUT_CHOICES)
            raise SettingsError(f"{ENV_LAYOUT}={environ.get(ENV_LAYOUT)!r} is not one of {choices}")
        strict_raw = environ.get(ENV_STRICT, "1").strip().lower()
        if strict_raw not in _FALSE | _TRUE:
            raise SettingsError(f"{ENV_STRICT}={environ.get(ENV_STRICT)!r} is not 0/1/true/false")
        supported = environ.get(ENV_SUPPORTED_VLLM, "").strip() or DEFAULT_SUPPORTED
        try:
            parse_specifier(supported)
        except ValueError as err:
            raise SettingsError(f"{ENV_SUPPORTED_VLLM}: {err}") from err
        receipt_dir = environ.get(ENV_RECEIPT_DIR, "").strip() or None
        try:
            guard_mode = guard_mod.parse_mode(environ.get(ENV_GUARD), default=DEFAULT_GUARD)
        except ValueError as err:
            raise SettingsError(f"{ENV_GUARD}: {err}") from err
        return cls(
            layout=layout,
            strict=strict_raw not in _FALSE,
            receipt_dir=receipt_dir,
            supported_vllm=supported,
            guard=guard_mode,
            guard_flush_s=_seconds(environ, ENV_GUARD_FLUSH_S, guard_mod.DEFAULT_FLUSH_INTERVAL_S),
        )


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise SettingsError(f"{name}={environ.get(name)!r} is not a number of seconds >= 0")
    return value
