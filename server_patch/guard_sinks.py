"""Where the stride guard's counts go: the process's receipt, and Prometheus counters.

Receipts are the channel that always works: vLLM runs the builder in engine
and worker processes whose own Prometheus registry nobody scrapes, and the
load generator reads receipts into server.json and gates on them. Prometheus
counters are for dashboards, where the process can serve them: the embedded
reference server (one process), or vLLM with Prometheus in multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR`` set before the server starts, as vLLM itself
does when it runs several API servers), where every process's counters are
summed on /metrics.

Both sinks run at the guard's flushes, never per call: the per-call cost of
the guard stays a few integer comparisons whatever is attached.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from server_patch.guard import Sink, Snapshot
from server_patch.receipts import Receipt, utc_now

#: The receipt section the guard writes (``loadgen.telemetry`` reads it).
RECEIPT_SECTION = "guard"
#: Prometheus counter names without the ``_total`` suffix the client adds on exposition.
CALLS_COUNTER = "dsv4_qual_c128a_builder_calls"
VIOLATIONS_COUNTER = "dsv4_qual_c128a_stride_violations"

_COUNTERS: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()
_COUNTERS_LOCK = threading.Lock()


def receipt_sink(get_receipt: Callable[[], Receipt | None]) -> Sink:
    """A sink that writes each snapshot (plus ``updated``) as the receipt's ``guard`` section.

    ``get_receipt`` is asked at every flush, so a receipt made (or moved)
    after the guard still gets the counts; None means "no receipt: skip".
    The file is replaced whole (``Receipt.merge_section``), so readers never
    see half a write. Only the write that first carries a violation is
    fsync'd: the periodic count updates run on the builder's thread, where a
    busy disk's fsync would stall an engine step for milliseconds.
    """
    synced_first = {"pid": os.getpid(), "done": False}

    def write_guard_section(snapshot: Snapshot) -> None:
        receipt = get_receipt()
        if receipt is None:
            return
        if synced_first["pid"] != os.getpid():  # a forked child reports its own first
            synced_first.update(pid=os.getpid(), done=False)
        durable = snapshot["first_violation"] is not None and not synced_first["done"]
        receipt.merge_section(RECEIPT_SECTION, {**snapshot, "updated": utc_now()},
                              durable=durable)
        synced_first["done"] = synced_first["done"] or durable

    return write_guard_section


def _counter(prometheus_client: Any, registry: Any, name: str, documentation: str) -> Any:
    try:
        return prometheus_client.Counter(name, documentation, registry=registry)
    except ValueError:
        # Already registered by someone else in this registry (e.g. a server
        # that declares the same metric): count into theirs.
        existing = getattr(registry, "_names_to_collectors", {}).get(f"{name}_total")
        if isinstance(existing, prometheus_client.Counter):
            return existing
        raise


def _counters(prometheus_client: Any, registry: Any) -> tuple[Any, Any]:
    """One pair of counters per registry, however many guards feed it."""
    with _COUNTERS_LOCK:
        pair = _COUNTERS.get(registry)
        if pair is None:
            pair = (
                _counter(prometheus_client, registry, CALLS_COUNTER,
                         "C128A top-k metadata builder calls seen by the dsv4-qual stride guard"),
                _counter(prometheus_client, registry, VIOLATIONS_COUNTER,
                         "C128A builder calls that returned rows off the persistent buffer's "
                         "row stride (what a captured CUDA graph reads)"),
            )
            _COUNTERS[registry] = pair
        return pair


def prometheus_sink(registry: Any = None) -> Sink | None:
    """A sink adding each flush's new calls and violations to the two counters.

    Returns None when ``prometheus_client`` is not importable (the guard then
    reports through receipts only). ``registry`` defaults to the client's
    global registry. Counts reach the counters at the guard's flushes, so a
    scrape lags the builder by at most the flush interval; the first
    violation is flushed at once.

    The counters are registered at the first flush with a call to count, not
    before: vLLM loads the plugin in its API server too, which never builds,
    and a counter stuck at 0 on its /metrics would misstate a busy server.
    """
    try:
        import prometheus_client
    except ImportError:
        return None
    registry = prometheus_client.REGISTRY if registry is None else registry
    exported = {"pid": os.getpid(), "calls": 0, "violations": 0}
    counters: list[tuple[Any, Any]] = []
    lock = threading.Lock()

    def add_to_counters(snapshot: Snapshot) -> None:
        with lock:
            if exported["pid"] != os.getpid():  # a forked child counts from zero
                exported.update(pid=os.getpid(), calls=0, violations=0)
            if int(snapshot["calls"]) <= exported["calls"]:
                return
            if not counters:
                counters.append(_counters(prometheus_client, registry))
            calls_counter, violations_counter = counters[0]
            for key, counter in (("calls", calls_counter), ("violations", violations_counter)):
                delta = int(snapshot[key]) - exported[key]
                if delta > 0:
                    counter.inc(delta)
                    exported[key] += delta

    return add_to_counters


def standard_sinks(get_receipt: Callable[[], Receipt | None], registry: Any = None) -> list[Sink]:
    """The receipt sink, plus the Prometheus sink where ``prometheus_client`` is importable."""
    sinks = [receipt_sink(get_receipt)]
    prometheus = prometheus_sink(registry)
    if prometheus is not None:
        sinks.append(prometheus)
    return sinks
