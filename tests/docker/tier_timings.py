"""How long each stage of the docker tier took, printed at the end of the session.

The tier's cost is mostly one-time work that a cache can skip (stand-in images, the
wheelhouse); the printed times show which stages ran and which were cache hits, so a
slow CI run can be read at a glance. Stdlib only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

_STAGES: list[tuple[str, float]] = []


@contextmanager
def stage(name: str) -> Iterator[list[str]]:
    """Time a block; append words to the yielded list to annotate it (e.g. "cached")."""
    notes: list[str] = []
    start = time.monotonic()
    try:
        yield notes
    finally:
        label = f"{name} ({', '.join(notes)})" if notes else name
        _STAGES.append((label, time.monotonic() - start))


def recorded() -> list[tuple[str, float]]:
    return list(_STAGES)
