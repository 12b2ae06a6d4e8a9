"""Continuous batching over the shared KV pool, with per-step C128A metadata.

Each step: admit waiting requests (their prompts are prefilled this step), then one
decode token for every running request. The C128A metadata of the step is built by
server_patch's builder, in the configured layout, into persistent buffers at the
batch's active width (as vLLM's `_build_c128a_metadata` asks since #50004). Attention
then reads the compressed KV through every row the builder wrote:

- decode rows hold global slot ids (sparse decode attention reads the first
  `decode_lens[r]`); prefill rows hold request-local indices (sparse prefill
  attention reads a token's causal count of them, through its request's blocks);
- a step the graph mode captures replays the consumers frozen at start-up, which read
  at the capture stride (`graphs.py`, `consumer.py`); any other step reads the views
  the builder returned, at their runtime stride.

What each row read is judged entry by entry (`reads.py`): its own context, missing
context or another request's, and whose. A row's foreign share picks the face it gives
its request (`faces.py`: salad, cross-talk or lost, by the configured thresholds), and
the request that wrote most of what it read supplies what the reply then writes: its
facts or its words, kept while the pool holds its entries (`carried.py`). Nothing else
decides a reply, and nothing is random.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from server_patch.c128a import C128ABuilder
from server_patch.c128a import builder as make_builder
from server_patch.sim.batch import next_rows
from server_patch.sim.carried import CarriedFacts
from server_patch.sim.config import CAPTURED, SimConfig
from server_patch.sim.faces import Face, face_for
from server_patch.sim.facts import Carried
from server_patch.sim.graphs import MetadataGraphs
from server_patch.sim.kv import KVPool, entry_owner, entry_value
from server_patch.sim.model import Piece, Reply
from server_patch.sim.reads import RowReads, judge


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
    # Each face its reply took, and whose KV the read that gave it found most of.
    faced_by: dict[Face, int] = field(default_factory=dict)
    tokens: list[str] | None = None  # the prompt's tokens (what a prefix cache hashes)
    hashes: list[bytes] = field(default_factory=list)  # its full blocks' chain of hashes
    cached: int = 0  # prompt tokens a prefix-cache hit gave it (not prefilled)
    shared_blocks: int = 0  # its first blocks, held through the cache
    shortcut: bool = False  # its prefill took the captured indexer shortcut


@dataclass
class EngineStats:
    steps: int = 0
    pure_decode_steps: int = 0
    mixed_steps: int = 0
    replayed_steps: int = 0  # steps whose attention read through the captured consumers
    misread_rows: int = 0  # rows (decode and prefill) that read anything but their own
    misread_prefill_rows: int = 0
    foreign_rows: int = 0  # rows that read some other request's KV
    missing_rows: int = 0  # rows that missed some of their own entries
    corrupted_requests: int = 0  # requests lost: a row's foreign share passed the fatal one
    # The quiet faces (a clean finish): requests that wrote token salad for a stretch,
    # and requests whose reply took on another request's facts.
    salad_requests: int = 0
    cross_talk_requests: int = 0
    finished_requests: int = 0
    aborted_requests: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    # Requests finished cleanly before the first request was lost (cold vs warm).
    finished_before_first_corruption: int | None = None
    first_corruption_step: int | None = None
    # vLLM's prefix-cache counters (tokens).
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    # Requests whose prefill took the captured indexer shortcut (#52492's face), and
    # facts an answer copied altered: from an entry the indexer never selected, or from
    # another request's entry a misplaced row read.
    indexer_shortcut_requests: int = 0
    unselected_facts: int = 0
    foreign_facts: int = 0


class Engine:
    def __init__(self, cfg: SimConfig, build: C128ABuilder | None = None,
                 on_replies_end: Callable[[], None] | None = None) -> None:
        """`on_replies_end` runs in every step in which requests finish, before any of
        their replies can end: the step runs on the event loop that streams them, and
        gives it back only when it returns. What it publishes (the stride guard's counts,
        into the receipt) then covers every builder call made for a reply a client has
        received, so a gate that reads it after the replies never reads it early."""
        self.cfg = cfg
        self.on_replies_end = on_replies_end
        self.device = torch.device(cfg.device)
        self.build: C128ABuilder = build or make_builder(cfg.layout)
        self.graphs = MetadataGraphs(cfg, self.build, self.device)
        self.pool = KVPool(cfg, self.device)
        self.carried = CarriedFacts(self.pool.owners)
        self.waiting: deque[SimRequest] = deque()
        # The persistent batch's rows: None where a request finished since the last step.
        self.rows: list[SimRequest | None] = []
        self.stats = EngineStats()
        self._uids = itertools.count(1)
        self._wake = asyncio.Event()
        self._closed = False

    # -- requests -------------------------------------------------------------------

    def new_request(self, prompt_tokens: int, reply: Reply,
                    tokens: list[str] | None = None) -> SimRequest:
        return SimRequest(uid=next(self._uids), prompt_tokens=prompt_tokens, reply=reply,
                          tokens=tokens)

    def add(self, request: SimRequest) -> None:
        self.waiting.append(request)
        self._wake.set()

    def abort(self, request: SimRequest) -> None:
        """The client went away: free its blocks now (vLLM aborts the same way)."""
        if request.finished:
            return
        if request in self.waiting:
            self.waiting.remove(request)
        if request in self.rows:
            self.rows[self.rows.index(request)] = None
        self.pool.release(request.blocks)
        self.carried.finish(request.uid)
        request.finished = True
        self.stats.aborted_requests += 1

    @property
    def running(self) -> list[SimRequest]:
        """The running requests, in row order."""
        return [r for r in self.rows if r is not None]

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # -- the step ---------------------------------------------------------------------

    def _admit(self) -> list[SimRequest]:
        cfg = self.cfg
        running = len(self.running)
        budget = cfg.max_num_batched_tokens - running
        admitted: list[SimRequest] = []
        cache = self.pool.cache
        while self.waiting and running + len(admitted) < cfg.max_num_seqs:
            request = self.waiting[0]
            hit: list[int] = []
            if cache is not None and request.tokens is not None:
                if not request.hashes:
                    request.hashes = cache.hashes(request.tokens)
                hit = cache.lookup(request.hashes, request.prompt_tokens)
            new = request.prompt_tokens - len(hit) * cfg.kv_block_size
            if new > budget:
                break
            self.waiting.popleft()
            budget -= new
            # Held at once: a later admission's new blocks must not evict them.
            self.pool.share(hit)
            request.blocks = list(hit)
            request.shared_blocks = len(hit)
            request.cached = len(hit) * cfg.kv_block_size
            admitted.append(request)
        return admitted

    def step(self) -> None:
        admitted = self._admit()
        rows = next_rows(self.rows, admitted)
        self.rows = list(rows)
        decode = rows[:len(rows) - len(admitted)]
        admitted = rows[len(decode):]  # prefills in their rows' order
        if not decode and not admitted:
            return
        for r in decode:
            self.pool.allocate(r.blocks, r.computed + 1)
        for r in admitted:
            self.pool.allocate(r.blocks, r.prompt_tokens)
            self.carried.start(r.uid, r.reply.script.carried)
            self._prefix_counted(r)
        decode_view, decode_lens, prefill_view = self._build_metadata(decode, admitted)
        self._write_kv(decode, admitted)
        for r in admitted:  # its prompt's full blocks, findable by later prompts
            self.pool.mark_cached(r.hashes, r.blocks)
        replay = self.graphs.replays(has_prefill=bool(admitted))
        self._attend(decode, admitted, decode_view, decode_lens, prefill_view, replay)

        st = self.stats
        st.steps += 1
        st.replayed_steps += replay
        if admitted:
            st.mixed_steps += 1 if decode else 0
        else:
            st.pure_decode_steps += 1
        if self._advance(decode, admitted) and self.on_replies_end is not None:
            self.on_replies_end()

    def _build_metadata(self, decode: list[SimRequest], admitted: list[SimRequest]
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The step's C128A metadata, as vLLM's `_build_c128a_metadata` asks for it:
        decode tokens first, then every prompt token, at the batch's active width."""
        cfg, dev, graphs = self.cfg, self.device, self.graphs
        n_dec = len(decode)
        positions_list = [r.computed for r in decode]
        for r in admitted:
            positions_list.extend(range(r.cached, r.prompt_tokens))
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
        return self.build(
            positions, cfg.compress_ratio, n_dec, token_to_req, block_table,
            cfg.compressed_per_block, slot_mapping, graphs.decode_buffer,
            graphs.decode_lens_buffer, graphs.prefill_buffer,
            max_compressed_tokens=cfg.active_width(max_seq_len),
        )

    def _attend(self, decode: list[SimRequest], admitted: list[SimRequest],
                decode_view: torch.Tensor, decode_lens: torch.Tensor,
                prefill_view: torch.Tensor, replay: bool) -> None:
        """Read every row the builder wrote, count what was wrong, and decide fates."""
        if decode:
            reads, got, right, shared = self._read_decode(decode, decode_view, decode_lens,
                                                          replay)
            self._count(reads, prefill=False)
            self._fact_reads(decode, reads, got, right, shared)
            rows = zip(decode, reads.foreign_share.tolist(), reads.foreign_owner.tolist(),
                       reads.owner_entries.tolist(), strict=True)
            for r, share, owner, entries in rows:
                if owner:
                    self._foreign_read(r, share, owner, entries)
        for r, local in self._prefill_rows(admitted, prefill_view, replay):
            reads = self._read_prefill(r, local)
            self._count(reads, prefill=True)
            if bool((reads.foreign > 0).any()):
                # Its prompt was read with another's context: its worst row decides.
                worst = reads.most_foreign()
                self._foreign_read(r, float(reads.foreign_share[worst]),
                                   int(reads.foreign_owner[worst]),
                                   int(reads.owner_entries[worst]))

    def _foreign_read(self, r: SimRequest, share: float, owner: int, entries: int) -> None:
        """A row of `r` read `entries` entries of request `owner`, `share` of its read
        foreign: the face that gives (faces.py), if the reply takes it."""
        cfg = self.cfg
        face = face_for(share, salad=cfg.salad_foreign_share,
                        cross_talk=cfg.cross_talk_foreign_share, fatal=cfg.fatal_foreign_share)
        if face is Face.NONE:
            return
        carried = self.carried.get(owner) or Carried()
        if not r.reply.take(face, carried, owner, entries):
            return
        r.faced_by[face] = owner
        st = self.stats
        if face is Face.LOST:
            st.corrupted_requests += 1
            if st.first_corruption_step is None:
                st.first_corruption_step = st.steps
                st.finished_before_first_corruption = st.finished_requests
        elif face is Face.CROSS_TALK:
            st.cross_talk_requests += 1
        else:
            st.salad_requests += 1

    def _advance(self, decode: list[SimRequest], admitted: list[SimRequest]) -> int:
        """One token for every running request; finished ones leave holes in the rows.
        Returns how many finished."""
        st = self.stats
        finished = 0
        for r in decode:
            r.computed += 1
        for r in admitted:
            r.computed = r.prompt_tokens
            st.prompt_tokens += r.prompt_tokens
        for i, row in enumerate(self.rows):
            if row is None:
                continue
            row.queue.put_nowait(row.reply.next_piece())
            st.generation_tokens += 1
            if row.reply.done:
                self._finish(row)
                self.rows[i] = None
                finished += 1
        return finished

    def _count(self, reads: RowReads, prefill: bool) -> None:
        st = self.stats
        misread = int(reads.misread.sum())
        st.misread_rows += misread
        if prefill:
            st.misread_prefill_rows += misread
        st.foreign_rows += int((reads.foreign > 0).sum())
        st.missing_rows += int((reads.missing > 0).sum())

    def _finish(self, r: SimRequest) -> None:
        r.finished = True
        self.pool.release(r.blocks)
        self.carried.finish(r.uid)
        self.stats.finished_requests += 1
        r.queue.put_nowait(None)

    def _write_kv(self, decode: list[SimRequest], admitted: list[SimRequest]) -> None:
        """Compressed entries completed this step go into the pool (before attention)."""
        ratio = self.cfg.compress_ratio
        slots: list[int] = []
        values: list[int] = []
        for r in decode:
            if (r.computed + 1) % ratio == 0:
                j = (r.computed + 1) // ratio - 1
                slots += self.pool.slots(r.blocks, range(j, j + 1))
                values.append(int(entry_value(r.uid, j)))
        for r in admitted:
            entries = range(r.cached // ratio, r.prompt_tokens // ratio)
            slots += self.pool.slots(r.blocks, entries)
            values += [int(entry_value(r.uid, j)) for j in entries]
        if slots:
            self.pool.write(torch.tensor(slots, dtype=torch.int64, device=self.device),
                            torch.tensor(values, dtype=torch.int64, device=self.device))

    def _read_decode(self, decode: list[SimRequest], view: torch.Tensor, lens: torch.Tensor,
                     replay: bool) -> tuple[RowReads, torch.Tensor, torch.Tensor | None,
                                            torch.Tensor | None]:
        """What each decode row's sparse attention read: global slot ids into the pool.
        Also the values it read, and (where a row's request holds cached blocks) what it
        should have read and which reads were of its cached blocks."""
        dev = self.device
        slots, read_len = self.graphs.decode_reads(len(decode), view, lens, replay)
        expected = torch.tensor([(r.computed + 1) // self.cfg.compress_ratio for r in decode],
                                dtype=torch.int64, device=dev)
        cols = max(int(read_len.max()), int(expected.max()), 1)
        slots = slots[:, :cols]  # columns no row reads are not looked at
        uids = torch.tensor([r.uid for r in decode], dtype=torch.int64, device=dev)
        got = self.pool.read(slots)
        if not any(r.shared_blocks for r in decode):
            return judge(got, read_len, uids, expected), got, None, None
        per = self.pool.per_block
        index = torch.arange(cols, device=dev)
        right = torch.stack([self.pool.read(self.pool.slots_of(r.blocks, index))
                             for r in decode])
        held = [torch.tensor(r.blocks[:r.shared_blocks] or [-1], dtype=torch.int64,
                             device=dev) for r in decode]
        shared = torch.stack([torch.isin(torch.div(row, per, rounding_mode="floor"), h)
                              & (row >= 0) for row, h in zip(slots, held, strict=True)])
        return judge(got, read_len, uids, expected, right, shared), got, right, shared

    def _fact_reads(self, decode: list[SimRequest], reads: RowReads, got: torch.Tensor,
                    right: torch.Tensor | None, shared: torch.Tensor | None) -> None:
        """A row that read another request's entry where a fact its answer copies lives
        makes the model copy that fact altered (what it read picks how: `skills.alter`)."""
        ratio = self.cfg.compress_ratio
        width = got.shape[1]
        misread = reads.misread.tolist()
        for i, r in enumerate(decode):
            positions = r.reply.script.positions
            if not misread[i] or not positions or r.reply.done:
                continue
            written = (r.computed + 1) // ratio
            for k, pos in enumerate(positions):
                col = pos // ratio
                if col >= min(written, width) or k in r.reply.misread:
                    continue
                value = int(got[i, col])
                ok = value == (int(right[i, col]) if right is not None
                               else int(entry_value(r.uid, col)))
                owner = int(entry_owner(got[i, col]))
                own_block = shared is not None and bool(shared[i, col])
                if ok or owner <= 0 or owner == r.uid or own_block:
                    continue
                if r.reply.misread_fact(k, value):
                    self.stats.foreign_facts += 1

    def _prefix_counted(self, r: SimRequest) -> None:
        """vLLM's prefix-cache counters, and the indexer shortcut a cached prefix can take
        (#52492): a prefill of few enough new tokens replays a graph captured with the
        shortcut, so a long context reads its first `indexer_top_k` entries, not its
        scored top-k, and a fact beyond them is copied from what was read instead."""
        cfg, st = self.cfg, self.stats
        if self.pool.cache is not None:
            st.prefix_cache_queries += r.prompt_tokens
            st.prefix_cache_hits += r.cached
        if not (cfg.indexer == CAPTURED and r.cached > 0
                and r.prompt_tokens - r.cached <= cfg.capture_tokens
                and r.prompt_tokens > cfg.shortcut_tokens):
            return
        r.shortcut = True
        st.indexer_shortcut_requests += 1
        for k, pos in enumerate(r.reply.script.positions):
            entry = pos // cfg.indexer_ratio
            if entry >= cfg.indexer_top_k and r.reply.misread_fact(k, entry):
                st.unselected_facts += 1

    def _prefill_rows(self, admitted: list[SimRequest], view: torch.Tensor, replay: bool
                      ) -> list[tuple[SimRequest, torch.Tensor]]:
        """Each admitted request with its prefill rows' local indices (one row a token)."""
        if not admitted:
            return []
        new = [r.prompt_tokens - r.cached for r in admitted]
        rows = self.graphs.prefill_reads(sum(new), view, replay)
        cols = max(r.prompt_tokens // self.cfg.compress_ratio for r in admitted) or 1
        out, start = [], 0
        for r, count in zip(admitted, new, strict=True):
            out.append((r, rows[start:start + count, :cols]))
            start += count
        return out

    def _read_prefill(self, r: SimRequest, local: torch.Tensor) -> RowReads:
        """What each prefill token's sparse attention read: its causal count of local
        indices, resolved through its own request's blocks into the pool."""
        dev = self.device
        causal = torch.div(torch.arange(r.cached + 1, r.prompt_tokens + 1, device=dev),
                           self.cfg.compress_ratio, rounding_mode="floor")
        got = self.pool.read(self.pool.slots_of(r.blocks, local))
        uids = torch.full((causal.shape[0],), r.uid, dtype=torch.int64, device=dev)
        if not r.shared_blocks:
            return judge(got, causal, uids, causal)
        cols = torch.arange(local.shape[1], device=dev)
        right = self.pool.read(self.pool.slots_of(r.blocks, cols)).expand_as(got)
        shared = (local >= 0) & (local < r.shared_blocks * self.pool.per_block)
        return judge(got, causal, uids, causal, right, shared)

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
