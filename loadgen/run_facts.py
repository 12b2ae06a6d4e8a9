"""RunFacts: what a run learnt beyond its records.

Written to run.json when the run starts and again when it ends (summary.json repeats
it), read back by every report and by the soak; tolerant of keys an older or newer
writer added or left out. Pydantic dataclasses: the engine fills them in as the run
goes (attributes, `dataclasses.replace`, positional construction), and run.json's
model (`results.run.RunFile`) validates them when the file is read.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, field, is_dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, InstanceOf, model_validator
from pydantic.dataclasses import dataclass

from loadgen.load_claim import LoadClaim

#: The node a load generator runs for (compose and the fleet recipes set it: in a
#: container the hostname is the container's id).
HOST_ENV = "DSV4_QUAL_HOST"


def node_name() -> str | None:
    """The node this load generator runs for: what run.json, the history's rounds, the
    fleet's verdict and the metrics' `node` label all call it."""
    return (os.environ.get(HOST_ENV) or "").strip() or socket.gethostname() or None


#: A figure as written: an int stays an int, a float a float (a `float` field would
#: write an older run.json's `2` back as `2.0`).
Number = int | float
#: Keys an older or newer writer added are left out.
_TOLERANT = ConfigDict(extra="ignore")


def _mapping(value: Any) -> Any:
    """Anything but a mapping (or the object itself) reads as the defaults."""
    return value if isinstance(value, dict) or is_dataclass(value) else {}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(config=_TOLERANT)
class ClientReport:
    """The load generator's view of itself over the run: was it the bottleneck?

    summary.json's `client`; with worker processes, their CPU pooled and each one's
    figures under `per_worker`."""

    cpu_s: Number | None = None
    wall_s: Number | None = None
    cpu_util: Number | None = None
    cpu_ms_per_request: Number | None = None
    loop_lag_ms_p50: Number | None = None
    loop_lag_ms_p99: Number | None = None
    loop_lag_ms_max: Number | None = None
    saturated: bool = False
    #: Why, when saturated: `client` (its own CPU or blocking work) or `host` (its loop
    #: waited for CPUs other processes held).
    saturation: str | None = None
    #: Share of the run the event loop spent runnable but waiting for a CPU (Linux).
    cpu_wait_share: Number | None = None
    workers: int | None = None  # worker processes (None: the run sent from one)
    per_worker: list[dict[str, Any]] = field(default_factory=list)


@dataclass(config=_TOLERANT)
class ReadyProbe:
    """How a server became ready: how long the run waited, and what said so."""

    base_url: str = ""
    waited_s: Number | None = None
    readiness: str | None = None  # BOTH_PROBES, or the one probe that answered


def _claim(value: Any) -> LoadClaim | None:
    return value if isinstance(value, LoadClaim) else LoadClaim.from_dict(value)


@dataclass(config=_TOLERANT)
class RunFacts:
    """What a run learnt beyond its records (run.json's `run`, summary.json's `run`)."""

    run_id: str
    scenario: str
    base_urls: list[str]
    model: str = ""
    started: Number = field(default_factory=time.time)
    finished: Number | None = None
    interrupted: str | None = None
    invalid: str | None = None
    ready: Annotated[list[Annotated[ReadyProbe, BeforeValidator(_mapping)]],
                     BeforeValidator(_listed)] = field(default_factory=list)
    chars_per_token: Number | None = None
    server_restarts: int = 0
    phases_done: list[str] = field(default_factory=list)
    #: The items the reference phase sent, one request each (empty: no reference phase).
    reference_items: list[str] = field(default_factory=list)
    #: The load as shipped and as run (None: a run.json from before it was recorded).
    load: Annotated[InstanceOf[LoadClaim] | None, BeforeValidator(_claim)] = None
    client: Annotated[ClientReport, BeforeValidator(_mapping)] = field(
        default_factory=ClientReport)
    #: The node it ran for (None in a run.json written before it was recorded).
    node: str | None = field(default_factory=node_name)
    #: The special tokens the server declared (GET /tokenizer_info), looked for in the
    #: replies as those of `verdicts.tokenizer` are; None: the server describes no
    #: tokenizer (or a run.json from before it was asked), and the judge had the files
    #: and the catalogue only.
    server_special_tokens: list[str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _as_written(cls, data: Any) -> Any:
        """A run.json's facts (a mapping; the engine's own construction passes by): what
        an older writer left out is unknown, and its node not this machine's."""
        if not isinstance(data, dict):
            return data
        return {"run_id": "", "scenario": "", "base_urls": [], "node": None, **data}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "load": self.load.to_dict() if self.load else {}}

    @property
    def duration_s(self) -> float | None:
        if self.started and self.finished:
            return self.finished - self.started
        return None
