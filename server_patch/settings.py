"""The plugin's environment settings, parsed once and validated.

vLLM calls a general plugin with no arguments, in every process it starts, so
the environment is the only way to configure it (and it is inherited by every
engine and worker process).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from server_patch.c128a.layouts import LAYOUTS
from server_patch.vllm_compat import DEFAULT_SUPPORTED, parse_specifier

ENV_LAYOUT = "DSV4_QUAL_C128A_LAYOUT"
ENV_STRICT = "DSV4_QUAL_STRICT"
ENV_RECEIPT_DIR = "DSV4_QUAL_RECEIPT_DIR"
ENV_SUPPORTED_VLLM = "DSV4_QUAL_SUPPORTED_VLLM"

OFF = "off"
DEFAULT_LAYOUT = "capacity"
#: What ``DSV4_QUAL_C128A_LAYOUT`` accepts: a builder layout, or ``off``.
LAYOUT_CHOICES: tuple[str, ...] = (*LAYOUTS, OFF)

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
        return cls(
            layout=layout,
            strict=strict_raw not in _FALSE,
            receipt_dir=receipt_dir,
            supported_vllm=supported,
        )
