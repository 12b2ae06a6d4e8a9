"""The sim's knobs, scaled down from DeepSeek-V4 so a CPU steps it in milliseconds.

DeepSeek-V4's C128A layers keep one compressed KV entry per 128 tokens, and vLLM
sizes the metadata buffers' capacity as cdiv(max_model_len, 128) rounded up to 128.
The sim keeps the same arithmetic with a smaller ratio and alignment, so short
prompts already span several compressed entries and the active width of a batch is
well below the capacity, which is the condition of the bug.

Some settings are about the release being imitated rather than the model's size:
`graph_mode` (which steps replay a captured consumer) and the foreign shares at which
another request's context changes what the toy model writes (`faces.py`): token salad
for a stretch, the other request's facts (cross-talk), or a lost request.
"""

from __future__ import annotations

from dataclasses import dataclass

from server_patch.c128a import LAYOUTS

#: vLLM's CUDA-graph modes the sim imitates. `full_and_piecewise` (the DSpark recipe's,
#: and the only one 0.27's UNIFORM_BATCH builder allows): pure-decode steps replay a
#: FULL graph, mixed steps run piecewise and read the builder's returned views.
#: `full`: every step replays a FULL graph, as 0.28+'s FlashMLA builder allows
#: (AttentionCGSupport.ALWAYS); its prefill rows are read at the capture stride too.
FULL_AND_PIECEWISE = "full_and_piecewise"
FULL = "full"
GRAPH_MODES: tuple[str, ...] = (FULL_AND_PIECEWISE, FULL)
#: How the sparse indexer decides its short-context shortcut (vLLM #52492): `runtime`
#: from the request's real context (the fix), `captured` baked into the piecewise graph
#: a short prefill replays (the bug: with a cached prefix, a long context takes the
#: shortcut and reads candidates 0..top_k-1 instead of its scored top-k).
RUNTIME = "runtime"
CAPTURED = "captured"
INDEXER_MODES: tuple[str, ...] = (RUNTIME, CAPTURED)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


DEFAULT_BATCHED_TOKENS = 16384


@dataclass(frozen=True)
class SimConfig:
    layout: str = "capacity"
    device: str = "cpu"
    max_num_seqs: int = 32
    max_model_len: int = 4096
    compress_ratio: int = 16
    kv_block_size: int = 64  # tokens per KV block, as vLLM's --block-size
    alignment: int = 16  # the sim's _C128A_TOPK_ALIGNMENT
    #: 0: DEFAULT_BATCHED_TOKENS, or one whole max_model_len prompt when that is longer
    #: (a --max-model-len above it must not stop the sim).
    max_num_batched_tokens: int = 0
    model: str = "dsv4-sim"
    seed: int = 0
    guard: bool = True
    receipts_dir: str | None = None
    step_delay_s: float = 0.0
    graph_mode: str = FULL_AND_PIECEWISE
    # A row whose read is more than this share another request's KV changes what the
    # toy model writes (faces.py): salad for a stretch, the other request's facts, or
    # lost (it loops to max_tokens); missing entries (unwritten slots) never do.
    salad_foreign_share: float = 0.5
    cross_talk_foreign_share: float = 0.7
    fatal_foreign_share: float = 0.9
    # vLLM's automatic prefix caching (on by default in vLLM; off by default here, so
    # the C128A face keeps its calibration: `prefix_cache.py`).
    prefix_caching: bool = False
    # The sparse indexer (DeepSeek-V4's C4 layers): one entry per `indexer_ratio`
    # tokens, `indexer_top_k` entries selected per query; a request whose context holds
    # at most that many entries takes them all (the shortcut). vLLM's: 4 and 512, so the
    # shortcut covers 2048 tokens. A prefill of at most `capture_tokens` new tokens
    # replays a captured piecewise graph.
    indexer: str = RUNTIME
    indexer_ratio: int = 4
    indexer_top_k: int = 512
    capture_tokens: int = 512

    def __post_init__(self) -> None:
        if not self.max_num_batched_tokens:
            object.__setattr__(self, "max_num_batched_tokens",
                               max(DEFAULT_BATCHED_TOKENS, self.max_model_len))
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {self.layout!r}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu or cuda, not {self.device!r}")
        if self.indexer not in INDEXER_MODES:
            raise ValueError(f"indexer must be one of {', '.join(INDEXER_MODES)}, "
                             f"not {self.indexer!r}")
        for name in ("indexer_ratio", "indexer_top_k", "capture_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.graph_mode not in GRAPH_MODES:
            raise ValueError(f"graph_mode must be one of {', '.join(GRAPH_MODES)}, "
                             f"not {self.graph_mode!r}")
        for name in ("salad_foreign_share", "cross_talk_foreign_share", "fatal_foreign_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within 0..1")
        if self.kv_block_size % self.compress_ratio:
            raise ValueError("kv_block_size must be a multiple of compress_ratio")
        if self.max_num_batched_tokens < self.max_model_len:
            raise ValueError("max_num_batched_tokens must hold one max_model_len prompt")

    @property
    def capacity(self) -> int:
        """Compressed columns per metadata row: vLLM's c128a_max_compressed."""
        return cdiv(cdiv(self.max_model_len, self.compress_ratio), self.alignment) * self.alignment

    @property
    def compressed_per_block(self) -> int:
        """Compressed entries per KV block: vLLM's block_size // compress_ratio."""
        return self.kv_block_size // self.compress_ratio

    @property
    def blocks_per_seq(self) -> int:
        return cdiv(self.max_model_len, self.kv_block_size)

    @property
    def num_kv_blocks(self) -> int:
        # Room for every running sequence at full length: the sim never preempts.
        return self.max_num_seqs * self.blocks_per_seq + 1

    @property
    def shortcut_tokens(self) -> int:
        """The longest context the indexer's shortcut is right for (all its entries fit
        in the top-k): 2048 tokens at vLLM's ratio and top-k."""
        return self.indexer_ratio * self.indexer_top_k

    def active_width(self, max_seq_len: int) -> int:
        """The batch-dependent width #50004 introduced (also passed by #52823's caller)."""
        width = next_pow2(max(max_seq_len // self.compress_ratio, 1))
        return min(max(width, self.alignment), self.capacity)
