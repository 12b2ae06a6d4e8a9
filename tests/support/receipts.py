"""Patch receipts as the dsv4-qual plugin writes them, for tests that play a server.

A receipt belongs to one server start (`server.id`, which the server also exports on
/metrics) and, for a model process, says which model it loaded and where it sits in the
server (`model.parallel`): the fields the gate ties and counts receipts by.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

V4 = ("DeepseekV4ForCausalLM",)


def parallel(*, dp_size: int = 1, dp_index: int = 0, local: int | None = None,
             world: int = 1, rank: int = 0, hybrid: bool = False) -> dict[str, Any]:
    """The model watch's `parallel` section for one process."""
    return {"data_parallel_size": dp_size,
            "data_parallel_size_local": dp_size if local is None else local,
            "data_parallel_rank": dp_index, "data_parallel_index": dp_index,
            "data_parallel_external_lb": False, "data_parallel_hybrid_lb": hybrid,
            "world_size": world, "rank": rank, "tensor_parallel_size": world,
            "pipeline_parallel_size": 1, "nnodes": 1, "node_rank": 0}


def receipt(pid: int, server_id: str | None, *, layout: str = "capacity",
            runs_model: bool = True, architectures: Iterable[str] = V4,
            model_type: str = "deepseek_v4", compress_ratios: list[int] | None = None,
            c128a: int = 1, calls: int = 40, violations: int = 0,
            upstream: str = "capacity", vllm: str = "0.28.0", model: str = "org/model",
            revision: str | None = None, place: dict[str, Any] | None = None,
            hooks: dict[str, str] | None = None) -> dict[str, Any]:
    """One process's receipt; `runs_model=False` is the API server (no model, no calls)."""
    first = ({"call": 2, "views": ["decode"], "decode_row_stride": 64,
              "decode_buffer_row_stride": 640, "num_decode_tokens": 2,
              "num_prefill_tokens": 0, "max_compressed_tokens": 64}
             if violations and runs_model else None)
    data: dict[str, Any] = {
        "pid": pid, "process": "VLLM::Worker" if runs_model else "vllm serve",
        "layout": layout, "patched": layout != "off", "upstream_variant": upstream,
        "vllm_version": vllm,
        "guard": {"mode": "1", "calls": calls if runs_model else 0,
                  "violations": violations if runs_model else 0, "first_violation": first},
        "model": {"loaded": runs_model, "c128a_builders": c128a if runs_model else 0,
                  "hooks": hooks or {"model_loader": "ok", "c128a_builders": "ok"}},
    }
    if server_id is not None:
        data["server"] = {"id": server_id, "address": "0.0.0.0:8000", "maker_pid": 1,
                          "made_here": not runs_model}
    if runs_model:
        ratios = compress_ratios if compress_ratios is not None else (
            [0, 4, 128] if model_type == "deepseek_v4" else None)
        data["model"].update(architectures=list(architectures), model_type=model_type,
                             model=model, revision=revision, compress_ratios=ratios,
                             parallel=place or parallel())
    return data


def api_server(pid: int, server_id: str | None, **kwargs: Any) -> dict[str, Any]:
    return receipt(pid, server_id, runs_model=False, **kwargs)


def write_receipts(directory: Path, receipts: Iterable[dict[str, Any]]) -> Path:
    """Each receipt as `<host>-<pid>.json`, the plugin's file name."""
    directory.mkdir(parents=True, exist_ok=True)
    for data in receipts:
        (directory / f"host-{data['pid']}.json").write_text(json.dumps(data))
    return directory
