"""Patch receipts: one JSON file per server process, read back and told apart by role.

Each process that loads the dsv4-qual plugin (API server, engine core, each worker)
writes `<host>-<pid>.json`: the C128A layout it installed, the vLLM release and what
upstream's own builder writes there, the stride guard's counts, the server start it
belongs to (the `server` section: an id every process of one start shares, which the
API server exports on /metrics), and (the `model` section) whether that process loaded
the model, which model, its data-parallel and worker rank, and how many C128A metadata
builders it made. Only the processes that run the model build C128A metadata, so those
are the receipts a gate weighs; the API server's receipt proves nothing about the
builder.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from loadgen import fields

#: The layout a process effectively ran when our builder is not in place.
UPSTREAM = "off"
#: The compress ratio of DeepSeek-V4's C128A attention layers.
C128A_RATIO = 128
#: DeepSeek-V4 and its MTP drafter: both have C128A layers.
DEEPSEEK_V4_ARCHITECTURES = frozenset({"DeepseekV4ForCausalLM", "DeepSeekV4MTPModel"})
DEEPSEEK_V4_MODEL_TYPES = frozenset({"deepseek_v4"})
#: DeepSeek-V4.1: compress ratios 1 and 2 only, no C128A layer.
DEEPSEEK_V41_ARCHITECTURES = frozenset({"DeepseekV41ForCausalLM"})
DEEPSEEK_V41_MODEL_TYPES = frozenset({"deepseek_v41"})


def receipts_dir_state(directory: str | Path | None) -> str | None:
    """What the run found where receipts were to be: None (none named), `present`,
    `missing`, `not_a_directory` or `unreadable`. Recorded when the run reads them, so
    a report rebuilt later says what the run saw, not what is there now."""
    if not directory:
        return None
    path = Path(directory)
    try:
        if not path.exists():
            return "missing"
        if not path.is_dir():
            return "not_a_directory"
        next(iter(path.iterdir()), None)
    except OSError:
        return "unreadable"
    return "present"


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


def receipt_server_id(receipt: dict[str, Any]) -> str | None:
    """The server start a receipt names (its `server.id`), None when it names none."""
    server = receipt.get("server")
    value = server.get("id") if isinstance(server, dict) else None
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Device:
    """The GPU a process ran on, as NVML named it (each part None where not said)."""

    name: str | None = None
    uuid: str | None = None
    driver: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> Device | None:
        """None where the receipt names no device at all."""
        if not isinstance(data, dict):
            return None
        found = cls(**{k: str(v) for k in ("name", "uuid", "driver")
                       if (v := data.get(k)) not in (None, "")})
        return found if found != cls() else None


@dataclass(frozen=True)
class Parallel:
    """Where a model process sits in its server: data-parallel rank, worker rank."""

    data_parallel_size: int
    data_parallel_size_local: int
    data_parallel_index: int
    local_engines_only: bool  # hybrid or external load balancing: the endpoint fronts its own
    world_size: int  # workers per data-parallel rank (tensor x pipeline x context parallel)
    rank: int  # this worker's rank among them

    @classmethod
    def from_dict(cls, data: Any) -> Parallel | None:
        """None unless every number the coverage rule needs is there."""
        if not isinstance(data, dict):
            return None
        dp = _opt_int(data.get("data_parallel_size"))
        local = _opt_int(data.get("data_parallel_size_local"))
        index = _opt_int(data.get("data_parallel_index"))
        if index is None:
            index = _opt_int(data.get("data_parallel_rank"))
        world, rank = _opt_int(data.get("world_size")), _opt_int(data.get("rank"))
        if None in (dp, local, index, world, rank):
            return None
        assert dp is not None and local is not None and index is not None
        assert world is not None and rank is not None
        return cls(dp, local, index, data.get("data_parallel_external_lb") is True
                   or data.get("data_parallel_hybrid_lb") is True, world, rank)

    @property
    def ranks_served(self) -> int:
        """Data-parallel ranks behind the endpoint of this process's start."""
        return max(1, self.data_parallel_size_local if self.local_engines_only
                   else self.data_parallel_size)


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
    server_id: str | None = None  # the server start it belongs to
    server_address: str | None = None
    model_type: str | None = None
    model_types: tuple[str, ...] = ()  # every load's (target model, drafter)
    model_name: str | None = None  # the path or repository the model was loaded from
    revision: str | None = None
    ratios_known: bool = False  # the receipt states the config's compress ratios
    compress_ratios: tuple[int, ...] | None = None  # None: the config has no such key
    parallel: Parallel | None = None
    device: Device | None = None  # the GPU it ran on

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessReceipt:
        guard = fields.section(data, "guard")
        model = data.get("model") if isinstance(data.get("model"), dict) else None
        section = fields.section(data, "model")
        server = fields.section(data, "server")
        pid = data.get("pid")
        loads = [x for x in section.get("loads") or [] if isinstance(x, dict)]
        types = [str(t) for t in [section.get("model_type"), *(x.get("model_type")
                                                              for x in loads)] if t]
        ratios = section.get("compress_ratios")
        return cls(
            file=str(data.get("file") or ""),
            pid=pid if isinstance(pid, int) else None,
            process=str(data.get("process") or data.get("process_name") or "?"),
            layout=fields.text(data, "layout"),
            patched=data.get("patched") is True,
            upstream_variant=data.get("upstream_variant"),
            vllm_version=data.get("vllm_version"),
            guard_mode=guard.get("mode"),
            guard_calls=_int(guard.get("calls")),
            violations=_int(guard.get("violations")),
            first_violation=guard.get("first_violation") or None,
            model_known=model is not None,
            runs_model=bool(model and model.get("loaded") is True),
            architectures=[str(a) for a in section.get("architectures") or []],
            c128a_builders=_int(section.get("c128a_builders")),
            hooks=dict(section.get("hooks") or {}),
            server_id=receipt_server_id(data),
            server_address=fields.text(server, "address"),
            model_type=fields.text(section, "model_type"),
            model_types=tuple(dict.fromkeys(types)),
            model_name=str(section["model"]) if section.get("model") else None,
            revision=fields.text(section, "revision"),
            ratios_known="compress_ratios" in section,
            compress_ratios=tuple(int(r) for r in ratios if isinstance(r, int))
            if isinstance(ratios, list) else None,
            parallel=Parallel.from_dict(section.get("parallel")),
            device=Device.from_dict(section.get("device")),
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

    @property
    def has_c128a_by_design(self) -> bool:
        """Its model has C128A layers: a DeepSeek-V4 architecture or model type, or a
        config that declares compress ratio 128."""
        return bool(set(self.architectures) & DEEPSEEK_V4_ARCHITECTURES
                    or set(self.model_types) & DEEPSEEK_V4_MODEL_TYPES
                    or C128A_RATIO in (self.compress_ratios or ()))

    @property
    def claims_deepseek_v41(self) -> bool:
        return bool(set(self.architectures) & DEEPSEEK_V41_ARCHITECTURES
                    or set(self.model_types) & DEEPSEEK_V41_MODEL_TYPES)

    @property
    def is_deepseek_v41(self) -> bool:
        """DeepSeek-V4.1 by its architecture, its model type and its config's compress
        ratios (stated, and none of them 128): a model without C128A layers by design."""
        return (bool(set(self.architectures) & DEEPSEEK_V41_ARCHITECTURES)
                and bool(set(self.model_types) & DEEPSEEK_V41_MODEL_TYPES)
                and self.ratios_known and C128A_RATIO not in (self.compress_ratios or ())
                and not self.has_c128a_by_design)


@dataclass(frozen=True)
class EndpointStart:
    """What one measured endpoint said about its server start, at the run's start and end."""

    base_url: str
    server_ids: tuple[str, ...]  # usually one; two when it restarted during the run
    problem: str | None = None  # why no receipt can be tied to it

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EndpointStart:
        return cls(str(data.get("base_url") or ""),
                   tuple(str(i) for i in data.get("server_ids") or []), data.get("problem"))

    def to_dict(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "server_ids": list(self.server_ids),
                "problem": self.problem}


@dataclass(frozen=True)
class SetAside:
    """A receipt of the directory that belongs to no measured endpoint's current start."""

    file: str
    reason: str


@dataclass(frozen=True)
class ReceiptsSelection:
    """server.json's `receipts_selection`, typed: which receipts were counted and why.

    Read tolerantly (`from_dict`): a server.json written before a field existed gives
    its default; summary.json holds `to_dict()`."""

    receipts_dir: str | None = None
    #: What the run found there (`receipts_dir_state`): present, missing, ...
    receipts_dir_state: str | None = None
    basis: str | None = None
    endpoints: tuple[EndpointStart, ...] = ()
    kept: int = 0
    ignored: int = 0
    ignored_files: tuple[str, ...] = ()
    set_aside: tuple[SetAside, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ReceiptsSelection:
        data = data if isinstance(data, dict) else {}

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        return cls(
            receipts_dir=text("receipts_dir"), receipts_dir_state=text("receipts_dir_state"),
            basis=text("basis"),
            endpoints=tuple(EndpointStart.from_dict(e) for e in data.get("endpoints") or []
                            if isinstance(e, dict)),
            kept=_int(data.get("kept")), ignored=_int(data.get("ignored")),
            ignored_files=tuple(str(f) for f in data.get("ignored_files") or []),
            set_aside=tuple(SetAside(str(a.get("file")), str(a.get("reason")))
                            for a in data.get("set_aside") or [] if isinstance(a, dict)))

    def to_dict(self) -> dict[str, Any]:
        return {"receipts_dir": self.receipts_dir,
                "receipts_dir_state": self.receipts_dir_state, "basis": self.basis,
                "endpoints": [e.to_dict() for e in self.endpoints], "kept": self.kept,
                "ignored": self.ignored, "ignored_files": list(self.ignored_files),
                "set_aside": [{"file": a.file, "reason": a.reason} for a in self.set_aside]}


@dataclass
class ReceiptFacts:
    """The receipts of the measured endpoints' current server starts, and what was not."""

    processes: list[ProcessReceipt] = field(default_factory=list)
    endpoints: list[EndpointStart] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)
    set_aside_count: int | None = None  # when `set_aside` lists only the first of them

    @classmethod
    def from_dicts(cls, receipts: list[dict[str, Any]], *,
                   endpoints: list[EndpointStart] | None = None,
                   set_aside: list[SetAside] | None = None,
                   set_aside_count: int | None = None) -> ReceiptFacts:
        return cls([ProcessReceipt.from_dict(r) for r in receipts], list(endpoints or []),
                   list(set_aside or []), set_aside_count)

    @property
    def ignored(self) -> int:
        return self.set_aside_count if self.set_aside_count is not None else len(self.set_aside)

    @property
    def found(self) -> int:
        """Receipts in the directory, counted or not."""
        return len(self.processes) + self.ignored

    @property
    def model_processes(self) -> list[ProcessReceipt]:
        return [p for p in self.processes if p.runs_model]

    @property
    def c128a_processes(self) -> list[ProcessReceipt]:
        """Model processes with C128A layers: they made a C128A builder, or their guard
        saw builder calls (then the layers exist whatever the count says)."""
        return [p for p in self.model_processes if p.c128a_builders > 0 or p.guard_calls > 0]

    def of_start(self, server_id: str) -> list[ProcessReceipt]:
        return [p for p in self.processes if p.server_id == server_id]

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
    def violating(self) -> list[ProcessReceipt]:
        return [p for p in self.processes if p.violations]

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
            "server_ids": sorted({p.server_id for p in self.processes if p.server_id}),
            "set_aside": self.ignored,
            "processes": [{
                "process": p.name, "file": p.file, "layout": p.layout,
                "effective_layout": p.effective_layout, "upstream_variant": p.upstream_variant,
                "server_id": p.server_id, "runs_model": p.runs_model,
                "architectures": p.architectures, "model_types": list(p.model_types),
                "c128a_builders": p.c128a_builders, "guard_mode": p.guard_mode,
                "guard_calls": p.guard_calls, "violations": p.violations,
            } for p in self.processes],
        }


def receipts_summary(receipts: list[dict[str, Any]]) -> dict[str, Any]:
    return ReceiptFacts.from_dicts(receipts).summary()
