"""The stride guard: see the #52448 bug class at the first narrow batch.

A consumer captured in a FULL CUDA graph reads C128A rows at the row stride
of the persistent buffer it saw at capture, ``buffer.stride(0)`` (the
capacity). A builder that hands back rows at any other stride (vLLM 0.27.x
packs them at the batch's active width) feeds rows 1..n another row's, or a
stale, slot ids. Requests then fail only by chance and only under load, so a
statistical gate needs hundreds of long requests; but the cause is plain in
the tensor metadata the builder returns, at the first batch narrower than the
capacity. The guard wraps a builder and compares, after each call, the
returned decode and prefill views' ``stride(0)`` with the buffers'.

It reads only ``.stride()`` and ``.shape``: no tensor data, so no
GPU synchronisation and no copies, and the cost is a Python frame and a few
integer comparisons per call. A view with fewer than two rows cannot show a
row stride (row 0 lines up whatever the stride), so it is not checked.

Modes: ``0`` off (``wrap`` returns the builder itself), ``1`` count, ``strict``
raise ``StrideViolationError`` on every violating call (vLLM's own CI). Counts
go to *sinks* (callables taking ``snapshot()``): at the first violation at
once, then at most every ``flush_interval_s`` (checked on calls), on
``flush()``, and, with ``flush_at_exit``, when the process exits.
``server_patch.guard_sinks`` has the receipt and Prometheus sinks.
"""

from __future__ import annotations

import atexit
import functools
import logging
import math
import multiprocessing.util
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch

from server_patch.c128a.builders import qualified_name
from server_patch.c128a.signature import C128ABuilder, Outputs, call_through, watched_inputs
from server_patch.receipts import utc_now

logger = logging.getLogger(__name__)

OFF = "0"
COUNT = "1"
STRICT = "strict"
#: What ``DSV4_QUAL_GUARD`` accepts, canonically.
MODES: tuple[str, ...] = (OFF, COUNT, STRICT)
DEFAULT_FLUSH_INTERVAL_S = 5.0

_OFF_WORDS = frozenset({"0", "false", "no", "off"})
_COUNT_WORDS = frozenset({"1", "true", "yes", "on", "count"})

Snapshot = dict[str, Any]
Sink = Callable[[Snapshot], None]


def parse_mode(text: str | None, default: str = COUNT) -> str:
    """``0``/``1``/``strict`` from a setting; synonyms (on/off, true/false) accepted.

    An empty or missing value means ``default``; anything else unreadable is a
    ``ValueError``, because a misspelt "strict" must not quietly mean "count".
    """
    raw = (text or "").strip().lower()
    if not raw:
        return default
    if raw in _OFF_WORDS:
        return OFF
    if raw in _COUNT_WORDS:
        return COUNT
    if raw == STRICT:
        return STRICT
    raise ValueError(f"{text!r} is not a stride guard mode (0, 1 or strict)")


class StrideViolationError(RuntimeError):
    """Strict mode: the builder returned rows at a stride a captured graph would misread.

    ``details`` is the violation's dict (the receipt's ``first_violation`` shape).
    """

    def __init__(self, details: dict[str, Any]) -> None:
        super().__init__(describe_violation(details))
        self.details = details


def describe_violation(details: dict[str, Any]) -> str:
    """One line for logs and exceptions, starting ``dsv4-qual:``."""
    parts = [
        f"{view} rows at stride {details[f'{view}_row_stride']} while the persistent buffer's "
        f"row stride (what a captured CUDA graph reads) is {details[f'{view}_buffer_row_stride']}"
        for view in details["views"]
    ]
    return (
        f"dsv4-qual: C128A stride violation at builder call {details['call']} "
        f"({details['builder']}): " + "; ".join(parts) + f" ({details['num_decode_tokens']} "
        f"decode + {details['num_prefill_tokens']} prefill tokens, "
        f"max_compressed_tokens={details['max_compressed_tokens']})"
    )


def _off_stride(view: torch.Tensor, buffer: torch.Tensor) -> bool | None:
    """True/False when ``view``'s row stride differs from the buffer's; None when it cannot tell.

    On every call, so written for speed: ``stride()[0]`` is cheaper than
    ``stride(0)``, and the shape test comes first because most prefill views
    of a decode step are empty. Anything that is not a 2-D+ tensor cannot tell.
    """
    try:
        shape = view.shape
        if len(shape) < 2 or shape[0] < 2:
            return None
        return view.stride()[0] != buffer.stride()[0]
    except (AttributeError, TypeError, IndexError):
        return None


def _violation_details(
    call: int,
    builder: str,
    views: list[str],
    num_decode_tokens: int,
    num_tokens: int,
    max_compressed_tokens: int,
    decode_view: torch.Tensor,
    global_decode_buffer: torch.Tensor,
    prefill_view: torch.Tensor,
    prefill_buffer: torch.Tensor,
) -> dict[str, Any]:
    return {
        "call": call,
        "time": utc_now(),
        "builder": builder,
        "views": views,
        "num_decode_tokens": int(num_decode_tokens),
        "num_prefill_tokens": int(num_tokens - num_decode_tokens),
        "max_compressed_tokens": int(max_compressed_tokens),
        "decode_row_stride": int(decode_view.stride(0)),
        "decode_view_shape": list(decode_view.shape),
        "decode_buffer_row_stride": int(global_decode_buffer.stride(0)),
        "decode_buffer_shape": list(global_decode_buffer.shape),
        "prefill_row_stride": int(prefill_view.stride(0)),
        "prefill_view_shape": list(prefill_view.shape),
        "prefill_buffer_row_stride": int(prefill_buffer.stride(0)),
        "prefill_buffer_shape": list(prefill_buffer.shape),
    }


class StrideGuard:
    """Per-process counters of builder calls and row-stride violations.

    ``wrap(fn)`` returns a drop-in for a ``build_c128a_topk_metadata`` (ours in
    any layout, or upstream's own) that checks every call's returned views.
    Counters are per process: a forked child starts again from zero (its
    parent's counts are the parent's to report).
    """

    def __init__(
        self,
        mode: str = COUNT,
        *,
        sinks: Iterable[Sink] = (),
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        flush_at_exit: bool = False,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
        expected: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"stride guard mode {mode!r} is not one of {', '.join(MODES)}")
        if not flush_interval_s >= 0 or math.isinf(flush_interval_s):
            raise ValueError(f"flush_interval_s must be finite and >= 0, not {flush_interval_s}")
        self._mode = mode
        self._sinks = tuple(sinks)
        self._has_sinks = bool(self._sinks)
        self._interval = float(flush_interval_s)
        self._clock = clock
        self._log = log or logger
        # Said with the first violation where the bug is left in on purpose (a positive
        # control), so the line reads as the finding it is, not as an alarm.
        self._expected = expected
        self._watching: str | None = None
        self._reset_counters()
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=functools.partial(_after_fork_in_child, ref))
        if flush_at_exit and self._sinks:
            atexit.register(_flush_if_changed, ref)
            # multiprocessing's forked children leave through os._exit, which
            # skips atexit; they run multiprocessing's finalizers instead, and
            # clear the inherited ones first, so arm one in each such child.
            multiprocessing.util.register_after_fork(self, StrideGuard._arm_exit_finalizer)

    def _reset_counters(self) -> None:
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._calls = 0
        self._checked = 0
        self._violations = 0
        self._first: dict[str, Any] | None = None
        self._version = 0  # bumps on every change; flushes compare it
        self._flushed_version = 0
        self._last_flush = self._clock()
        self._sink_failed = False

    def _arm_exit_finalizer(self) -> None:
        multiprocessing.util.Finalize(
            self, _flush_if_changed, args=(weakref.ref(self),), exitpriority=10
        )

    # ------------------------------------------------------------------ public

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def expected(self) -> str | None:
        """Why violations are expected here (a positive control), if they are."""
        return self._expected

    @property
    def enabled(self) -> bool:
        return self._mode != OFF

    @property
    def flush_interval_s(self) -> float:
        return self._interval

    def wrap(self, fn: C128ABuilder) -> C128ABuilder:
        """A ``build_c128a_topk_metadata`` drop-in that checks each call; ``fn`` itself when off.

        The wrapper (``signature.call_through``) carries ``fn``'s signature,
        attributes and name, plus ``stride_guard``.
        """
        if not self.enabled or getattr(fn, "stride_guard", None) is self:
            return fn
        self._watching = qualified_name(fn)
        observe = self._observe
        name = self._watching

        def after(args: tuple[Any, ...], kwargs: dict[str, Any], returned: Outputs) -> None:
            observe(returned, *watched_inputs(args, kwargs), name)

        build_c128a_topk_metadata = call_through(fn, after)
        build_c128a_topk_metadata.stride_guard = self  # type: ignore[attr-defined]
        return build_c128a_topk_metadata

    def observe(
        self,
        returned: Outputs,
        *,
        positions: torch.Tensor,
        num_decode_tokens: int,
        global_decode_buffer: torch.Tensor,
        prefill_buffer: torch.Tensor,
        max_compressed_tokens: int,
        builder: str = "?",
    ) -> None:
        """Count one builder call and check what it returned (what ``wrap``'s wrapper does).

        For callers that run a builder their own way. Raises
        ``StrideViolationError`` in strict mode when the call violates.
        """
        if self.enabled:
            self._observe(returned, positions, num_decode_tokens, global_decode_buffer,
                          prefill_buffer, max_compressed_tokens, builder)

    def _observe(
        self,
        returned: Outputs,
        positions: torch.Tensor,
        num_decode_tokens: int,
        global_decode_buffer: torch.Tensor,
        prefill_buffer: torch.Tensor,
        max_compressed_tokens: int,
        builder: str,
    ) -> None:
        decode_off = _off_stride(returned[0], global_decode_buffer)
        prefill_off = _off_stride(returned[2], prefill_buffer)
        if decode_off or prefill_off:
            views = [v for v, off in (("decode", decode_off), ("prefill", prefill_off)) if off]
            self._violation(views, returned, positions, num_decode_tokens, global_decode_buffer,
                            prefill_buffer, max_compressed_tokens, builder)
            return
        with self._lock:
            self._calls += 1
            self._version += 1
            if decode_off is not None or prefill_off is not None:
                self._checked += 1
            due = self._has_sinks and self._clock() - self._last_flush >= self._interval
            if due:
                self._last_flush = self._clock()
        if due:
            self.flush()

    def _violation(
        self,
        views: list[str],
        returned: Outputs,
        positions: torch.Tensor,
        num_decode_tokens: int,
        global_decode_buffer: torch.Tensor,
        prefill_buffer: torch.Tensor,
        max_compressed_tokens: int,
        builder: str,
    ) -> None:
        """The rare path: count, record the first one's details, log, flush at once, raise
        in strict mode."""
        details = None
        with self._lock:
            self._calls += 1
            self._version += 1
            self._checked += 1
            self._violations += 1
            call = self._calls
            first = self._first is None
            if first or self._mode == STRICT:
                details = _violation_details(
                    call, builder, views, num_decode_tokens, positions.shape[0],
                    max_compressed_tokens, returned[0], global_decode_buffer, returned[2],
                    prefill_buffer,
                )
                if first:
                    self._first = details
            due = self._has_sinks and (
                first or self._clock() - self._last_flush >= self._interval
            )
            if due:
                self._last_flush = self._clock()
        if first and details is not None:
            line = describe_violation(details)
            if self._expected:
                line += f" -- expected here: {self._expected}"
            self._log.warning("%s", line)
        if due:
            self.flush()
        if details is not None and self._mode == STRICT:
            raise StrideViolationError(details)

    def snapshot(self) -> Snapshot:
        """What the receipt's ``guard`` section holds: ``mode``, ``watching`` (the builder's
        name), ``calls``, ``checked`` (calls with a view of >= 2 rows), ``violations``
        (calls with a view off the buffer's row stride), ``first_violation``."""
        with self._lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> Snapshot:
        return {
            "mode": self._mode,
            "watching": self._watching,
            "calls": self._calls,
            "checked": self._checked,
            "violations": self._violations,
            "first_violation": dict(self._first) if self._first else None,
        }

    def flush(self) -> None:
        """Hand the current snapshot to every sink now.

        A failing sink is logged once, never raised: this runs inside the
        model's forward path, and a lost receipt write must not stop serving.
        """
        with self._flush_lock:
            with self._lock:
                version = self._version
                self._last_flush = self._clock()
                snapshot = self._snapshot_locked()
            for sink in self._sinks:
                try:
                    sink(snapshot)
                except Exception:
                    if not self._sink_failed:
                        self._log.warning("dsv4-qual: could not report the stride guard's "
                                          "counts", exc_info=True)
                    self._sink_failed = True
            self._flushed_version = max(self._flushed_version, version)

    def changed_since_flush(self) -> bool:
        """Whether any call was counted after the last flush."""
        with self._lock:
            return self._version != self._flushed_version


def _flush_if_changed(ref: weakref.ref[StrideGuard]) -> None:
    guard = ref()
    if guard is not None and guard.changed_since_flush():
        guard.flush()


def _after_fork_in_child(ref: weakref.ref[StrideGuard]) -> None:
    guard = ref()
    if guard is not None:
        guard._reset_counters()
