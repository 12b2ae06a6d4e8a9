"""Compile the C128A kernel before the first decode step needs it.

vLLM 0.30+ compiles upstream's builder kernel at start-up through its JIT-warmup
objects, so that no rank stalls on a Triton compile in the middle of a forward (under
tensor parallelism, one rank compiling while the others wait wedges the engine). The
plugin replaces that kernel with ours, so it must do the same for ours.

The plugin loads in every vLLM process, before any of them has touched CUDA, and some
of them (the API server, the engine core) fork workers: initializing CUDA there would
break every forked worker. So the warm-up never initializes CUDA itself: it is queued
with torch's lazy-CUDA-init calls and runs when the process initializes CUDA on its own
(at once, if it already has). Processes that never use CUDA never run it. It compiles
our kernel's one variant (``kernel.warm_up``: no launch, no allocation), which also
puts it in Triton's on-disk cache for every other process on the host.

A warm-up failure must never stop CUDA from starting: it is logged, and the first
build compiles the kernel as it would have anyway.
"""

from __future__ import annotations

import logging
import threading
import time

import torch

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_armed = False


def warm_up_now(log: logging.Logger = logger) -> bool:
    """Compile our kernel for the current CUDA device; False (logged) if it could not."""
    try:
        from server_patch.c128a import kernel

        start = time.perf_counter()
        kernel.warm_up()
    except Exception:
        log.warning("dsv4-qual: could not compile the C128A kernel ahead of the first "
                    "build; it compiles on first use instead", exc_info=True)
        return False
    log.info("dsv4-qual: C128A kernel compiled ahead of the first build (%.0f ms)",
             1e3 * (time.perf_counter() - start))
    return True


def warm_up_when_cuda_starts(log: logging.Logger = logger) -> bool:
    """Queue ``warm_up_now`` for when this process initializes CUDA (now, if it has).

    Once per process (a forked child inherits the queued call); returns whether this
    call armed it.
    """
    global _armed
    with _lock:
        if _armed:
            return False
        _armed = True
    # torch's own queue of calls deferred to CUDA initialisation (what
    # torch.cuda.manual_seed uses); it never initializes CUDA itself. A torch without
    # it must not stop the plugin from writing its receipt: the kernel then compiles
    # on first use.
    try:
        torch.cuda._lazy_call(lambda: warm_up_now(log))
    except Exception:
        log.warning("dsv4-qual: cannot queue the C128A kernel's warm-up in this torch; it "
                    "compiles on first use instead", exc_info=True)
        return False
    return True
