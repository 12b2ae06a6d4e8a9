"""Continuous batching over the shared KV pool, with per-step C128A metadata.

Each step: admit waiting requests (their prompts are prefilled this step), then one
decode token for every running request. The C128A metadata of the step is built by
server_patch's builder, in the configured layout, into persistent buffers at the
batch's active width (as vLLM's `_build_c128a_metadata` asks since #50004). Decode
attention then reads the compressed KV through those rows:

- a pure-decode step is what vLLM runs as a FULL CUDA graph: the consumer captured
  at start-up reads rows at the capture stride (`consumer.py`);
- a mixed step (a prefill in the batch) runs eagerly and reads the views the
  builder returned, at their runtime stride.

The toy model of each request compares what its row read with its own compressed
context; a wrong read loses it (`model.py`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from server_patch.c128a import C128ABuilder
from server_patch.c128a import builder as make_builder
from server_patch.sim.config import SimConfig
from server_patch.sim.consumer import DecodeConsumer, make_consumer
from server_patch.sim.kv import KVPool, entry_value
from server_patch.sim.model import Piece, Reply


@dataclass(eq=False)
class SimRequest:
    uid: int
    prompt_tokens: int
    reply: Reply
    queue: asyncio.Queue[Piece | None] = field(default_factory=asyncio.Queue)
    blocks: list[int] = field(default_factory=list)
    computed: int = 0  # tokens whose KV is written
    arrived: float = field(default_factory=time.monotonic)
    finished: bool = False


@dataclass
class EngineStats:
    steps: int = 0
    pure_decode_steps: int = 0
    mixed_steps: int = 0
    misread_rows: int = 0
    corrupted_requests: int = 0
    finished_requests: int = 0
    aborted_requests: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    # Requests finished cleanly before the first request was lost (cold vs warm).
    finished_before_first_corruption: int | None = None
    first_corruption_step: int | None = None


class Engine:
    def __init__(self, cfg: SimConfig, build: C128ABuilder | None = None) -> None:
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        self.build: C128ABuilder = build or make_builder(cfg.layout)
        rows, cap = cfg.max_num_batched_tokens, cfg.capacity
        dev = self.device
        self.decode_buffer = torch.full((rows, cap), -1, dtype=torch.int32, device=dev)
        self.decode_lens_buffer = torch.zeros(rows, dtype=torch.int32, device=dev)
        self.prefill_buffer = torch.full((rows, cap), -1, dtype=torch.int32, device=dev)
        self.pool = KVPool(cfg, dev)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.stats = EngineStats()
        self._uids = itertools.count(1)
        self._wake = asyncio.Event()
        self._closed = False
        self.consumer: DecodeConsumer = self._capture()

    # -- start-up -------------------------------------------------------------------

    def _capture(self) -> DecodeConsumer:
        """Build once as vLLM does for graph capture, and freeze the consumer on it.

        Capture metadata uses max_seq_len = max_model_len (so the width is the
        capacity) and zeroed dummy block tables: the rows then point into block 0,
        the null block, which no request ever owns.
        """
        cfg = self.cfg
        n = cfg.max_num_seqs
        dev = self.device
        positions = torch.full((n,), cfg.max_model_len - 1, dtype=torch.int64, device=dev)
        block_table = torch.zeros((n, cfg.blocks_per_seq), dtype=torch.int32, device=dev)
        view, _, _ = self.build(
            positions, cfg.compress_ratio, n, torch.arange(n, dtype=torch.int32, device=dev),
            block_table, cfg.compressed_per_block,
            torch.zeros(n, dtype=torch.int64, device=dev), self.decode_buffer,
            self.decode_lens_buffer, self.prefill_buffer,
            max_compressed_tokens=cfg.active_width(cfg.max_model_len),
        )
        return make_consumer(self.decode_buffer, self.decode_lens_buffer, view, n)

    # -- requests -------------------------------------------------------------------

    def new_request(self, prompt_tokens: int, reply: Reply) -> SimRequest:
        return SimRequest(uid=next(self._uids), prompt_tokens=prompt_tokens, reply=reply)

    def add(self, request: SimRequest) -> None:
        self.waiting.append(request)
        self._wake.set()

    def abort(self, request: SimRequest) -> None:
        """The client went away: free its blocks now (vLLM aborts the same way)."""
        if request.finished:
            return
        if request in self.waiting:
            self.waiting.remove(request)
        if request in self.running:
            self.running.remove(request)
        self.pool.release(request.blocks)
        request.finished = True
        self.stats.aborted_requests += 1

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # -- the step ---------------------------------------------------------------------

    def _admit(self) -> list[SimRequest]:
        cfg = self.cfg
        budget = cfg.max_num_batched_tokens - len(self.running)
        admitted: list[SimRequest] = []
        while (self.waiting and len(self.running) + len(admitted) < cfg.max_num_seqs
               and self.waiting[0].prompt_tokens <= budget):
            request = self.waiting.popleft()
            budget -= request.prompt_tokens
            admitted.append(request)
        return admitted

    def step(self) -> None:
        cfg = self.cfg
        dev = self.device
        admitted = self._admit()
        decode = self.running
        n_dec = len(decode)
        if not n_dec and not admitted:
            return
        for r in decode:
            self.pool.allocate(r.blocks, r.computed + 1)
        for r in admitted:
            self.pool.allocate(r.blocks, r.prompt_tokens)
        positions_list = [r.computed for r in decode]
        for r in admitted:
            positions_list.extend(range(r.prompt_tokens))
        n_tok = len(positions_list)
        positions = torch.tensor(positions_list, dtype=torch.int64, device=dev)
        width_blocks = max((len(r.blocks) for r in decode), default=1)
        table = [r.blocks + [0] * (width_blocks - len(r.blocks)) for r in decode] or [[0]]
        block_table = torch.tensor(table, dtype=torch.int32, device=dev)
        token_to_req = torch.zeros(n_tok, dtype=torch.int32, device=dev)
        if n_dec:
            token_to_req[:n_dec] = torch.arange(n_dec, dtype=torch.int32, device=dev)
        slot_mapping = torch.arange(n_tok, dtype=torch.int64, device=dev)
        max_seq_len = max([r.computed + 1 for r in decode] + [r.prompt_tokens for r in admitted])
        width = cfg.active_width(max_seq_len)

        decode_view, decode_lens, _prefill = self.build(
            positions, cfg.compress_ratio, n_dec, token_to_req, block_table,
            cfg.compressed_per_block, slot_mapping, self.decode_buffer,
            self.decode_lens_buffer, self.prefill_buffer, max_compressed_tokens=width,
        )
        self._write_kv(decode, admitted)
        ok = self._attend(decode, decode_view, decode_lens, pure_decode=not admitted)

        st = self.stats
        st.steps += 1
        if admitted:
            st.mixed_steps += 1 if n_dec else 0
        else:
            st.pure_decode_steps += 1
        for r, good in zip(decode, ok, strict=True):
            if not good:
                st.misread_rows += 1
                if r.reply.corrupted_at is None:
                    st.corrupted_requests += 1
                    if st.first_corruption_step is None:
                        st.first_corruption_step = st.steps
                        st.finished_before_first_corruption = st.finished_requests
                r.reply.mark_misread()
        for r in decode:
            r.computed += 1
        for r in admitted:
            r.computed = r.prompt_tokens
            st.prompt_tokens += r.prompt_tokens
            self.running.append(r)
        for r in self.running:
            r.queue.put_nowait(r.reply.next_piece())
            st.generation_tokens += 1
        still = []
        for r in self.running:
            if r.reply.done:
                self._finish(r)
            else:
                still.append(r)
        self.running = still

    def _finish(self, r: SimRequest) -> None:
        r.finished = True
        self.pool.release(r.blocks)
        self.stats.finished_requests += 1
        r.queue.put_nowait(None)

    def _slots(self, r: SimRequest, entries: range) -> list[int]:
        per = self.pool.per_block
        return [r.blocks[j // per] * per + j % per for j in entries]

    def _write_kv(self, decode: list[SimRequest], admitted: list[SimRequest]) -> None:
        """Compressed entries completed this step go into the pool (before attention)."""
        ratio = self.cfg.compress_ratio
        slots: list[int] = []
        values: list[int] = []
        for r in decode:
            if (r.computed + 1) % ratio == 0:
                j = (r.computed + 1) // ratio - 1
                slots += self._slots(r, range(j, j + 1))
                values.append(entry_value(r.uid, j))
        for r in admitted:
            entries = range(r.prompt_tokens // ratio)
            slots += self._slots(r, entries)
            values += [entry_value(r.uid, j) for j in entries]
        if slots:
            self.pool.write(torch.tensor(slots, dtype=torch.int64, device=self.device),
                            torch.tensor(values, dtype=torch.int64, device=self.device))

    def _attend(self, decode: list[SimRequest], view: torch.Tensor, lens: torch.Tensor,
                pure_decode: bool) -> list[bool]:
        """Whether each decode row read exactly its own compressed context."""
        n = len(decode)
        if not n:
            return []
        if pure_decode:
            slots = self.consumer.read(n)
        else:
            cols = torch.arange(view.shape[-1], device=self.device)
            slots = torch.where(cols.unsqueeze(0) < lens[:n].to(torch.int64).unsqueeze(1),
                                view[:n].to(torch.int64), -1)
        width = slots.shape[1]
        cols = torch.arange(width, device=self.device)
        lens64 = lens[:n].to(torch.int64)
        uids = torch.tensor([r.uid for r in decode], dtype=torch.int64, device=self.device)
        expected_count = torch.tensor(
            [(r.computed + 1) // self.cfg.compress_ratio for r in decode],
            dtype=torch.int64, device=self.device)
        needed = cols.unsqueeze(0) < lens64.unsqueeze(1)
        got = self.pool.read(slots)
        want = entry_value(uids.unsqueeze(1), cols.unsqueeze(0))
        ok = ((got == want) | ~needed).all(dim=1) & (lens64 == expected_count)
        return ok.tolist()

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        while not self._closed:
            if not self.has_work():
                self._wake.clear()
                await self._wake.wait()
                continue
            self.step()
            await asyncio.sleep(self.cfg.step_delay_s)

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def snapshot(self) -> dict[str, Any]:
        return {"running": len(self.running), "waiting": len(self.waiting),
                "kv_usage": self.pool.usage, **self.stats.__dict__}
