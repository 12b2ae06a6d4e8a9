"""RunFacts: what a run learnt beyond its records.

Written to run.json when the run starts and again when it ends (summary.json repeats
it), read back by every report and by the soak; tolerant of keys an older or newer
writer added or left out.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from loadgen.load_claim import LoadClaim

#: The node a load generator runs for (compose and the fleet recipes set it: in a
#: container the hostname is the container's id).
HOST_ENV = "DSV4_QUAL_HOST"


def node_name() -> str | None:
    """The node this load generator runs for: what run.json, the history's rounds, the
    fleet's verdict and the metrics' `node` label all call it."""
    return (os.environ.get(HOST_ENV) or "").strip() or socket.gethostname() or None


@dataclass
class ClientReport:
    """The load generator's view of itself over the run: was it the bottleneck?

    summary.json's `client`; with worker processes, their CPU pooled and each one's
    figures under `per_worker`."""

    cpu_s: float | None = None
    wall_s: float | None = None
    cpu_util: float | None = None
    cpu_ms_per_request: float | None = None
    loop_lag_ms_p50: float | None = None
    loop_lag_ms_p99: float | None = None
    loop_lag_ms_max: float | None = None
    saturated: bool = False
    #: Why, when saturated: `client` (its own CPU or blocking work) or `host` (its loop
    #: waited for CPUs other processes held).
    saturation: str | None = None
    #: Share of the run the event loop spent runnable but waiting for a CPU (Linux).
    cpu_wait_share: float | None = None
    workers: int | None = None  # worker processes (None: the run sent from one)
    per_worker: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: Any) -> ClientReport:
        return _known(cls, data)


@dataclass
class ReadyProbe:
    """How a server became ready: how long the run waited, and what said so."""

    base_url: str = ""
    waited_s: float | None = None
    readiness: str | None = None  # BOTH_PROBES, or the one probe that answered

    @classmethod
    def from_dict(cls, data: Any) -> ReadyProbe:
        return _known(cls, data)


def _known(cls: Any, data: Any) -> Any:
    """An instance of `cls` from the keys of `data` it knows (anything not a mapping
    reads as the defaults)."""
    return cls(**_fields_of(cls, data))


def _fields_of(cls: Any, data: Any) -> dict[str, Any]:
    """The keys of `data` that are fields of `cls`: an older or newer writer's others
    left out."""
    if not isinstance(data, dict):
        return {}
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


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
    ready: list[ReadyProbe] = field(default_factory=list)
    chars_per_token: float | None = None
    server_restarts: int = 0
    phases_done: list[str] = field(default_factory=list)
    #: The items the reference phase sent, one request each (empty: no reference phase).
    reference_items: list[str] = field(default_factory=list)
    #: The load as shipped and as run (None: a run.json from before it was recorded).
    load: LoadClaim | None = None
    client: ClientReport = field(default_factory=ClientReport)
    #: The node it ran for (None in a run.json written before it was recorded).
    node: str | None = field(default_factory=node_name)
    #: The special tokens the server declared (GET /tokenizer_info), looked for in the
    #: replies as those of `verdicts.tokenizer` are; None: the server describes no
    #: tokenizer (or a run.json from before it was asked), and the judge had the files
    #: and the catalogue only.
    server_special_tokens: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "load": self.load.to_dict() if self.load else {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunFacts:
        """Tolerant of keys a newer or older writer added or left out."""
        values = _fields_of(cls, data)
        values.setdefault("run_id", "")
        values.setdefault("scenario", "")
        values.setdefault("base_urls", [])
        values.setdefault("node", None)  # not recorded then: unknown, not this machine
        values["client"] = ClientReport.from_dict(values.get("client"))
        values["load"] = LoadClaim.from_dict(values.get("load"))
        values["ready"] = [ReadyProbe.from_dict(r) for r in values.get("ready") or []]
        return cls(**values)

    @property
    def duration_s(self) -> float | None:
        if self.started and self.finished:
            return self.finished - self.started
        return None
