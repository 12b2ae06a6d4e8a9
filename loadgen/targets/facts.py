"""What we know about the server a run talked to, read back from server.json.

The gate and every report state the same facts (the C128A layout the server ran,
its vLLM version, which patch receipts counted, which model it served, how loaded it
was), so they are read once, here, into one typed object. Which receipts count is
worked out again from what the run recorded (`epochs.select_receipts`), so a results
directory written by an older dsv4-qual is judged by today's rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadgen.targets.epochs import (
    EndpointLooks,
    endpoint_looks,
    receipt_facts,
    select_receipts,
)
from loadgen.targets.receipts import ReceiptFacts, ReceiptsSelection
from loadgen.targets.telemetry_summary import (
    PrefixReuse,
    TelemetrySummary,
    acceptance_by_server,
    by_server,
    phase_acceptance,
    prefix_reuse,
    summarize,
)


def server_versions(document: dict[str, Any]) -> list[str]:
    """What each server's /version said (vLLM answers {"version": "0.27.1"})."""
    found = set()
    for info in (document.get("servers") or {}).values():
        version = info.get("version")
        if isinstance(version, dict) and version.get("version"):
            found.add(str(version["version"]))
    return sorted(found)


def model_roots(document: dict[str, Any]) -> dict[str, list[str]]:
    """Each served model's id -> the checkpoints /v1/models named as its root."""
    roots: dict[str, set[str]] = {}
    for info in (document.get("servers") or {}).values():
        models = info.get("models")
        listed = models.get("data") if isinstance(models, dict) else None
        for entry in listed if isinstance(listed, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry.get("root"):
                roots.setdefault(entry["id"], set()).add(checkpoint_name(str(entry["root"])))
    return {name: sorted(found) for name, found in roots.items()}


@dataclass
class ServerFacts:
    """What server.json says, typed: everything a report, the gate or the soak reads of
    the server (server.json itself stays the account of record)."""

    layout: str | None = None
    layout_source: str | None = None
    receipts: ReceiptFacts = field(default_factory=ReceiptFacts)  # of this server start
    selection: ReceiptsSelection = field(default_factory=ReceiptsSelection)
    versions: list[str] = field(default_factory=list)  # from /version
    telemetry: TelemetrySummary = field(default_factory=TelemetrySummary)
    looks: dict[str, EndpointLooks] = field(default_factory=dict)  # each endpoint's start
    #: Speculative decoding per phase (`telemetry_summary.phase_acceptance`), pooled...
    acceptance: dict[str, dict[str, float]] = field(default_factory=dict)
    #: ...and per server (`telemetry_summary.acceptance_by_server`).
    acceptance_by_server: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: /metrics over time, each server's samples in time order (`telemetry_summary.by_server`):
    #: grouped once here, for every page that plots them.
    samples_by_server: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    model_roots: dict[str, list[str]] = field(default_factory=dict)  # model id -> roots
    #: The prefix cache per phase, from the server's counters (`prefix_reuse`).
    prefix_cache: dict[str, PrefixReuse] = field(default_factory=dict)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> ServerFacts:
        selected = select_receipts(document) if document else {}
        per_server = acceptance_by_server(selected)
        return cls(
            layout=selected.get("c128a_layout"),
            layout_source=selected.get("c128a_layout_source"),
            receipts=receipt_facts(selected),
            selection=ReceiptsSelection.from_dict(selected.get("receipts_selection")),
            versions=server_versions(selected),
            telemetry=summarize(selected),
            looks=endpoint_looks(selected),
            acceptance=phase_acceptance(per_server),
            acceptance_by_server=per_server,
            samples_by_server=by_server(list(selected.get("samples") or [])),
            model_roots=model_roots(selected),
            prefix_cache=prefix_reuse(selected),
        )

    @property
    def vllm_versions(self) -> list[str]:
        """From the receipts when there are any (they name the process's vLLM), else /version."""
        return self.receipts.vllm_versions or self.versions


def checkpoint_name(path: str) -> str:
    """A Hugging Face cache path as its repository id (`.../models--org--name/snapshots/x`
    is `org/name`), so a server that resolved the id offline names the same checkpoint."""
    parts = path.rstrip("/").split("/")
    for part in parts:
        if part.startswith("models--"):
            return part.removeprefix("models--").replace("--", "/")
    return path


@dataclass(frozen=True)
class ModelIdentity:
    """Which model a run was served: what the server said of it, on every channel it has.

    `name` is the model the run asked for; `roots` what /v1/models gave as that name's
    `root` (vLLM: the path or repository on its command line); `models` and `revisions`
    what the receipts of the processes that run it say they loaded (a cache path read as
    its repository id). A channel a server does not offer stays empty.
    """

    name: str
    roots: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    revisions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "roots": list(self.roots), "models": list(self.models),
                "revisions": list(self.revisions)}

    def _checkpoint_channels(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The channels that name the checkpoint itself, not what it is served as."""
        return (("/v1/models root", tuple(sorted({checkpoint_name(r) for r in self.roots}))),
                ("model loaded (receipts)", self.models),
                ("revision (receipts)", self.revisions))

    def differences(self, other: ModelIdentity) -> list[str]:
        """Where the two differ, on the channels both offer (one phrase each).

        The served name is a label: where both sides state the checkpoint (its root, the
        model or revision the receipts name) and it agrees, another name is the same
        model; the names are compared only where nothing stronger is stated on both
        sides, and named beside a checkpoint that differs."""
        strong = list(zip(self._checkpoint_channels(), other._checkpoint_channels(),
                          strict=True))
        stated = [(label, mine, theirs) for (label, mine), (_, theirs) in strong
                  if mine and theirs]
        found = [f"{label} {', '.join(mine)} vs {', '.join(theirs)}"
                 for label, mine, theirs in stated if set(mine) != set(theirs)]
        if stated and not found:
            return []
        if self.name and other.name and self.name != other.name:
            found.insert(0, f"served name {self.name} vs {other.name}")
        return found

    def same_checkpoint_renamed(self, other: ModelIdentity) -> bool:
        """Both sides state the same checkpoint and serve it under different names."""
        return bool(self.name and other.name and self.name != other.name
                    and not self.differences(other))

    def describe(self) -> str:
        details = []
        if self.roots and self.roots != (self.name,):
            details.append(f"root {', '.join(self.roots)}")
        if self.models and self.models != self.roots:
            details.append(f"loaded from {', '.join(self.models)}")
        if self.revisions:
            details.append(f"revision {', '.join(self.revisions)}")
        return (self.name or "?") + (f" ({'; '.join(details)})" if details else "")


def model_identity(name: str, server: ServerFacts) -> ModelIdentity:
    """What the server said of the model `name` the run was served."""
    model = server.receipts.model_processes
    return ModelIdentity(
        name=name,
        roots=tuple(server.model_roots.get(name, ())),
        models=tuple(sorted({checkpoint_name(p.model_name) for p in model if p.model_name})),
        revisions=tuple(sorted({p.revision for p in model if p.revision})),
    )
