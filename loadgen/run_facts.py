"""RunFacts: what a run learnt beyond its records.

Written to run.json when the run starts and again when it ends (summary.json repeats
it), read back by every report and by the soak; tolerant of keys an older or newer
writer added or left out.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class RunFacts:
    """What a run learnt beyond its records (run.json's `run`, summary.json's `run`)."""

    run_id: str
    scenario: str
    base_urls: list[str]
    model: str = ""
    started: float = field(default_factory=time.time)
    finished: float | None = None
    interrupted: str | None = None
    invalid: str | None = None
    ready: list[dict[str, Any]] = field(default_factory=list)
    chars_per_token: float | None = None
    server_restarts: int = 0
    phases_done: list[str] = field(default_factory=list)
    #: The items the reference phase sent, one request each (empty: no reference phase).
    reference_items: list[str] = field(default_factory=list)
    #: The load as shipped and as run (`load_claim.LoadClaim.to_dict`).
    load: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunFacts:
        """Tolerant of keys a newer or older writer added or left out."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("run_id", "")
        values.setdefault("scenario", "")
        values.setdefault("base_urls", [])
        return cls(**values)

    @property
    def duration_s(self) -> float | None:
        if self.started and self.finished:
            return self.finished - self.started
        return None
