"""A test-only vLLM worker extension: lets a test look inside the live worker process.

Why: a receipt is what the plugin *says* it did; this asks the worker itself, after
startup, which function sits at the patch point (the module global that
`_build_c128a_metadata` looks up by name at call time). vLLM mixes this class into the
worker class (`--worker-extension-cls vllm_probe.Dsv4QualProbe`) and the dev-mode
endpoint `POST /collective_rpc {"method": "dsv4_qual_probe"}` calls it in every worker.

Loaded inside vLLM's worker: stdlib and torch only, nothing from the tests.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

PATCH_MODULE = "vllm.models.deepseek_v4.sparse_mla"
PATCH_NAME = "build_c128a_topk_metadata"


def _describe(fn: Any) -> dict[str, Any]:
    return {
        "module": getattr(fn, "__module__", None),
        "qualname": getattr(fn, "__qualname__", None),
        "repr": repr(fn)[:200],
    }


class Dsv4QualProbe:
    def dsv4_qual_probe(self) -> dict[str, Any]:
        """Which function is installed at the patch point in this worker, and who loaded it."""
        module = importlib.import_module(PATCH_MODULE)
        fn = getattr(module, PATCH_NAME)
        original = getattr(module, "_dsv4_qual_original", None)
        return {
            "pid": os.getpid(),
            "installed": _describe(fn),
            "module_file": getattr(module, "__file__", None),
            "plugin_imported": "server_patch.plugin" in sys.modules,
            "original_kept": _describe(original) if original is not None else None,
        }

    def dsv4_qual_call_builder(self) -> dict[str, Any]:
        """Call the installed builder once on a tiny CPU batch (1 decode + 1 prefill token).

        The plugin fills its receipt's `first_call` on the first call; this makes that
        call happen inside the real worker, the process that matters.
        """
        import torch

        module = importlib.import_module(PATCH_MODULE)
        fn = getattr(module, PATCH_NAME)
        width = 256
        global_decode = torch.full((4, width), -7, dtype=torch.int32)
        decode_lens = torch.full((4,), -7, dtype=torch.int32)
        prefill = torch.full((4, width), -7, dtype=torch.int32)
        block_table = torch.arange(16, dtype=torch.int32).reshape(1, 16) + 10
        decode, lens, prefill_local = fn(
            torch.tensor([300, 200], dtype=torch.int64),  # positions
            128,  # compress_ratio
            1,  # num_decode_tokens
            torch.tensor([0, 0], dtype=torch.int32),  # token_to_req_indices
            block_table,
            2,  # block_size (compressed tokens per KV block)
            torch.tensor([5, 6], dtype=torch.int64),  # slot_mapping
            global_decode,
            decode_lens,
            prefill,
            max_compressed_tokens=128,
        )
        return {
            "pid": os.getpid(),
            "decode": decode.reshape(decode.shape[0], -1)[:, :4].tolist(),
            "decode_lens": lens.tolist(),
            "prefill": prefill_local[:, :4].tolist(),
        }
