"""The C128A top-k metadata builder: layouts, Triton kernel, torch reference.

``builder(layout)`` returns a drop-in for vLLM's
``vllm.models.deepseek_v4.sparse_mla.build_c128a_topk_metadata``. Importing this
package needs torch but neither vLLM nor triton: the kernel module is imported
only when a Triton build is asked for.
"""

from server_patch.c128a.builders import IMPLS, builder, qualified_name
from server_patch.c128a.consumer import FrozenDecodeReader
from server_patch.c128a.layouts import CAPACITY, LAYOUTS, PACKED, PREFIX
from server_patch.c128a.observed import describe_call, observe_first_call
from server_patch.c128a.signature import (
    DEFAULT_MAX_COMPRESSED_TOKENS,
    PARAMETERS,
    SIGNATURE,
    C128ABuilder,
    call_through,
)

__all__ = [
    "CAPACITY",
    "DEFAULT_MAX_COMPRESSED_TOKENS",
    "IMPLS",
    "LAYOUTS",
    "PACKED",
    "PARAMETERS",
    "PREFIX",
    "SIGNATURE",
    "C128ABuilder",
    "FrozenDecodeReader",
    "builder",
    "call_through",
    "describe_call",
    "observe_first_call",
    "qualified_name",
]
