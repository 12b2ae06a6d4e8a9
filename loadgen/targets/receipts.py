"""Patch receipts: one JSON file per server process, read back and told apart by role.

Each process that loads the dsv4-qual plugin (API server, engine core, each worker)
writes `<host>-<pid>.json`: the C128A layout it installed, the vLLM release and what
upstream's own builder writes there, the stride guard's counts, and (the `model`
section) whether that process loaded the model and how many C128A metadata builders
it made. Only the processes that run the model build C128A metadata, so those are the
receipts a gate weighs; the API server's receipt proves nothing about the builder.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

#: The layout a process effectively ran when our builder is not in place.
UPSTREAM = "off"


def read_receipts(directory: str | Path | None) -> list[dict[str, Any]]:
    """Every patch receipt JSON in the directory (a half-written one is skipped)."""
    if not directory:
        return []
    path = Path(directory)
    if not path.is_dir():
        return []
    receipts = []
    for file in sorted(path.glob("*.json")):
        with contextlib.suppress(OSError, orjson.JSONDecodeError):
            data = orjson.loads(file.read_bytes())
            if isinstance(data, dict):
                data.setdefault("file", file.name)
                data.setdefault("file_mtime", file.stat().st_mtime)
                receipts.append(data)
    return receipts


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class ProcessReceipt:
    """One process's receipt, as the gate reads it."""

    file: str
    pid: int | None
    process: str
    layout: str | None  # what the plugin was asked to install
    patched: bool  # our builder is in place (else upstream's own)
    upstream_variant: str | None  # what upstream's builder writes in this release
    vllm_version: str | None
    guard_mode: str | None
    guard_calls: int
    violations: int
    first_violation: dict[str, Any] | None
    model_known: bool  # the receipt has a model section (the model watch ran)
    runs_model: bool  # this process loaded the model
    architectures: list[str]
    c128a_builders: int
    hooks: dict[str, str]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessReceipt:
        guard = data.get("guard") if isinstance(data.get("guard"), dict) else {}
        model = data.get("model") if isinstance(data.get("model"), dict) else None
        pid = data.get("pid")
        return cls(
            file=str(data.get("file") or ""),
            pid=pid if isinstance(pid, int) else None,
            process=str(data.get("process") or data.get("process_name") or "?"),
            layout=data.get("layout") if isinstance(data.get("layout"), str) else None,
            patched=data.get("patched") is True,
            upstream_variant=data.get("upstream_variant"),
            vllm_version=data.get("vllm_version"),
            guard_mode=guard.get("mode"),
            guard_calls=_int(guard.get("calls")),
            violations=_int(guard.get("violations")),
            first_violation=guard.get("first_violation") or None,
            model_known=model is not None,
            runs_model=bool(model and model.get("loaded") is True),
            architectures=[str(a) for a in (model or {}).get("architectures") or []],
            c128a_builders=_int((model or {}).get("c128a_builders")),
            hooks=dict((model or {}).get("hooks") or {}),
        )

    @property
    def effective_layout(self) -> str | None:
        """What the process ran: our layout when patched, else upstream's own builder."""
        return self.layout if self.patched else UPSTREAM

    @property
    def guard_on(self) -> bool:
        return self.guard_mode not in (None, "0")

    @property
    def name(self) -> str:
        return f"{self.process} (pid {self.pid})" if self.pid is not None else self.process


@dataclass
class ReceiptFacts:
    """The receipts of the current server start."""

    processes: list[ProcessReceipt] = field(default_factory=list)

    @classmethod
    def from_dicts(cls, receipts: list[dict[str, Any]]) -> ReceiptFacts:
        return cls([ProcessReceipt.from_dict(r) for r in receipts])

    @property
    def model_processes(self) -> list[ProcessReceipt]:
        return [p for p in self.processes if p.runs_model]

    @property
    def c128a_processes(self) -> list[ProcessReceipt]:
        """Model processes with C128A layers: they made a C128A builder, or their guard
        saw builder calls (then the layers exist whatever the count says)."""
        return [p for p in self.model_processes if p.c128a_builders > 0 or p.guard_calls > 0]

    @property
    def layouts(self) -> list[str]:
        return sorted({p.layout for p in self.processes if p.layout})

    @property
    def vllm_versions(self) -> list[str]:
        return sorted({str(p.vllm_version) for p in self.processes if p.vllm_version})

    @property
    def guard_calls(self) -> int:
        return sum(p.guard_calls for p in self.processes)

    @property
    def violations(self) -> int:
        return sum(p.violations for p in self.processes)

    @property
    def first_violation(self) -> dict[str, Any] | None:
        return next((p.first_violation for p in self.processes if p.first_violation), None)

    def summary(self) -> dict[str, Any]:
        """What summary.json and server.json state (`receipts_summary`)."""
        return {
            "count": len(self.processes),
            "layouts": self.layouts,
            "vllm_versions": self.vllm_versions,
            "patched": all(p.patched for p in self.processes) if self.processes else None,
            "guard_calls": self.guard_calls,
            "stride_violations": self.violations,
            "first_violation": self.first_violation,
            "model_processes": len(self.model_processes),
            "c128a_model_processes": len(self.c128a_processes),
            "processes": [{
                "process": p.name, "file": p.file, "layout": p.layout,
                "effective_layout": p.effective_layout, "upstream_variant": p.upstream_variant,
                "runs_model": p.runs_model, "architectures": p.architectures,
                "c128a_builders": p.c128a_builders, "guard_mode": p.guard_mode,
                "guard_calls": p.guard_calls, "violations": p.violations,
            } for p in self.processes],
        }


def receipts_summary(receipts: list[dict[str, Any]]) -> dict[str, Any]:
    return ReceiptFacts.from_dicts(receipts).summary()
