"""What we know about vLLM releases: the patch target, its signature, its layout.

Facts from the released wheels (0.26.0 - 0.34.0): the target is the module
global ``vllm.models.deepseek_v4.sparse_mla.build_c128a_topk_metadata``, looked
up by name at call time, with the same signature in every release; what
upstream's own builder writes changed twice (packed in 0.27.x, active-width
prefix from 0.29.0). Nothing here imports vLLM at module import.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from importlib import metadata

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from server_patch.c128a.signature import DEFAULT_MAX_COMPRESSED_TOKENS, PARAMETERS

TARGET_MODULE = "vllm.models.deepseek_v4.sparse_mla"
TARGET_ATTRIBUTE = "build_c128a_topk_metadata"
TARGET = f"{TARGET_MODULE}.{TARGET_ATTRIBUTE}"

#: The releases the plugin is tested against: 0.26.0 up to every 0.34.x (0.34.0's
#: sparse_mla.py is the same file as 0.31.0 - 0.33.0's: git blob cdab7d23).
DEFAULT_SUPPORTED = ">=0.26.0,<0.35.0"

#: Upstream's own C128A builder per release range. Pre-releases and dev builds
#: count as the release they precede when the range allows them (a
#: ``0.27.2rc1.dev110`` nightly is packed, as the #52448 reporter's was).
UPSTREAM_VARIANTS: tuple[tuple[str, str], ...] = (
    (">=0.26.0,<0.27.0", "capacity"),
    (">=0.27.0,<0.28.0", "packed"),
    (">=0.28.0,<0.29.0", "capacity"),
    (">=0.29.0,<0.35.0", "prefix"),
)
UNKNOWN = "unknown"


def installed_vllm_version() -> str | None:
    """The version of the importable ``vllm``: ``vllm.__version__``, else its dist metadata."""
    try:
        vllm = importlib.import_module("vllm")
    except Exception:
        return None
    version = getattr(vllm, "__version__", None)
    if isinstance(version, str) and version:
        return version
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def parse_specifier(text: str) -> SpecifierSet:
    """A PEP 440 specifier set; ``ValueError`` with the text when it is not one."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier as err:
        raise ValueError(f"not a PEP 440 version specifier: {text!r}") from err


def _parse_version(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


def is_supported(version: str | None, specifier: str = DEFAULT_SUPPORTED) -> bool:
    """Whether ``version`` is inside ``specifier`` (pre-releases included)."""
    parsed = _parse_version(version) if version else None
    if parsed is None:
        return False
    return parse_specifier(specifier).contains(parsed, prereleases=True)


def upstream_variant(version: str | None) -> str:
    """What upstream's own builder writes in that release: capacity, packed, prefix or unknown."""
    parsed = _parse_version(version) if version else None
    if parsed is None:
        return UNKNOWN
    for spec, variant in UPSTREAM_VARIANTS:
        if SpecifierSet(spec).contains(parsed, prereleases=True):
            return variant
    return UNKNOWN


def signature_problem(fn: Callable[..., object] | None) -> str | None:
    """Why ``fn`` is not a function we can replace with ours; None when it is.

    Our builder is a drop-in only for upstream's exact parameter list: same
    names in the same order, all positional-or-keyword, and only
    ``max_compressed_tokens`` defaulted (to 8192). A fork that adds arguments
    (e.g. DCP ranks) must not be silently replaced.
    """
    if fn is None:
        return f"{TARGET} does not exist"
    if not callable(fn):
        return f"{TARGET} is not callable ({type(fn).__name__})"
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as err:
        return f"cannot inspect the signature of {TARGET}: {err}"
    names = tuple(signature.parameters)
    if names != PARAMETERS:
        return f"{TARGET} has parameters ({', '.join(names)}); expected ({', '.join(PARAMETERS)})"
    for parameter in signature.parameters.values():
        if parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            return f"{TARGET} parameter {parameter.name!r} is {parameter.kind.description}"
        defaulted = parameter.default is not inspect.Parameter.empty
        if parameter.name == "max_compressed_tokens":
            if parameter.default != DEFAULT_MAX_COMPRESSED_TOKENS:
                return (
                    f"{TARGET} max_compressed_tokens defaults to {parameter.default!r}; "
                    f"expected {DEFAULT_MAX_COMPRESSED_TOKENS}"
                )
        elif defaulted:
            return f"{TARGET} parameter {parameter.name!r} unexpectedly has a default"
    return None
