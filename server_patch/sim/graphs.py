"""The persistent C128A buffers, their capture, and which steps replay it.

vLLM's metadata builder allocates its three buffers once, with `torch.empty`: nothing
fills them. The sim starts them as zeros, what freshly mapped device memory reads, so a
cold server is deterministic. Capture then writes them as vLLM's does (`_capture`), and
from there on each step's attention reads the rows either through the captured
consumers (a replayed FULL graph: the capture stride) or through the views the builder
returned (an eager or piecewise step: the runtime stride). Which steps replay is the
graph mode's whole difference (`config.GRAPH_MODES`).
"""

from __future__ import annotations

import torch

from server_patch.c128a import C128ABuilder
from server_patch.sim.config import FULL, SimConfig
from server_patch.sim.consumer import DecodeConsumer, RowConsumer, make_consumer, make_row_consumer


class MetadataGraphs:
    """The buffers a builder writes into, and the reads a step's attention makes."""

    def __init__(self, cfg: SimConfig, build: C128ABuilder, device: torch.device) -> None:
        self.cfg = cfg
        self.device = device
        rows, cap = cfg.max_num_batched_tokens, cfg.capacity
        self.decode_buffer = torch.zeros((rows, cap), dtype=torch.int32, device=device)
        self.decode_lens_buffer = torch.zeros(rows, dtype=torch.int32, device=device)
        self.prefill_buffer = torch.zeros((rows, cap), dtype=torch.int32, device=device)
        self.decode_consumer, self.prefill_consumer = self._capture(build)

    def _capture(self, build: C128ABuilder) -> tuple[DecodeConsumer, RowConsumer | None]:
        """Build once as vLLM does for graph capture, and freeze the consumers on it.

        Capture metadata uses max_seq_len = max_model_len (so the width is the
        capacity) and zeroed dummy block tables: decode rows then point into block 0,
        the null block, which no request ever owns. The `full` mode also captures
        steps with prefill tokens, so its prefill consumer freezes a prefill view.
        """
        cfg, dev = self.cfg, self.device
        n = cfg.max_num_seqs
        positions = torch.full((n,), cfg.max_model_len - 1, dtype=torch.int64, device=dev)
        block_table = torch.zeros((n, cfg.blocks_per_seq), dtype=torch.int32, device=dev)
        token_to_req = torch.arange(n, dtype=torch.int32, device=dev)
        slot_mapping = torch.zeros(n, dtype=torch.int64, device=dev)
        width = cfg.active_width(cfg.max_model_len)
        view, _, _ = build(positions, cfg.compress_ratio, n, token_to_req, block_table,
                           cfg.compressed_per_block, slot_mapping, self.decode_buffer,
                           self.decode_lens_buffer, self.prefill_buffer,
                           max_compressed_tokens=width)
        decode = make_consumer(self.decode_buffer, self.decode_lens_buffer, view, n)
        if cfg.graph_mode != FULL:
            return decode, None
        _, _, prefill_view = build(positions, cfg.compress_ratio, 0, token_to_req, block_table,
                                   cfg.compressed_per_block, slot_mapping, self.decode_buffer,
                                   self.decode_lens_buffer, self.prefill_buffer,
                                   max_compressed_tokens=width)
        prefill = make_row_consumer(self.prefill_buffer, prefill_view,
                                    cfg.max_num_batched_tokens)
        return decode, prefill

    def replays(self, has_prefill: bool) -> bool:
        """Whether a step runs as a replayed FULL graph (else piecewise: eager reads)."""
        return self.cfg.graph_mode == FULL or not has_prefill

    def decode_reads(self, n: int, view: torch.Tensor, lens: torch.Tensor, replay: bool
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """(slot ids, how many leading columns each row reads) of `n` decode rows."""
        if replay:
            return self.decode_consumer.read(n), self.decode_lens_buffer[:n].to(torch.int64)
        return view[:n].to(torch.int64), lens[:n].to(torch.int64)

    def prefill_reads(self, n: int, view: torch.Tensor, replay: bool) -> torch.Tensor:
        """Local compressed indices of `n` prefill rows, as the step's consumer sees them."""
        if replay and self.prefill_consumer is not None:
            return self.prefill_consumer.read(n)
        return view[:n].to(torch.int64)
