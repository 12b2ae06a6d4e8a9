"""GPU proof: a consumer captured in a real CUDA graph, replayed after fresh builds.

The consumer is a Triton kernel that reads each decode row's first
``decode_lens[r]`` slot ids; it is captured in a ``torch.cuda.CUDAGraph`` after
a full-width build (as vLLM captures with max_seq_len = max_model_len), so its
pointer and row stride are baked in. Then batches of DSpark decode rows (1 + 7
tokens per request) with mixed context lengths are built at their active width
and the graph is replayed: capacity and prefix must give zero corrupted rows,
packed must corrupt rows whenever the active width is below the capacity.

Run on a GPU host, on its own (TRITON_INTERPRET must not be set):
    PYTHONPATH=. python -m pytest -m gpu tests/server_patch/test_c128a_gpu.py -s
Imports only torch, triton, pytest and server_patch.
"""

from __future__ import annotations

import os

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.skipif(
        os.environ.get("TRITON_INTERPRET") == "1",
        reason="TRITON_INTERPRET=1 cannot be graph-captured; run the GPU tests on their own",
    ),
]

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from server_patch.c128a import CAPACITY, LAYOUTS, PACKED, PREFIX, builder, layouts  # noqa: E402

COMPRESS_RATIO = 128
BLOCK_SIZE = 256 // COMPRESS_RATIO  # compressed tokens per KV block (block size 256)
TOKENS_PER_REQUEST = 1 + 7  # DSpark verify step: 1 + num_speculative_tokens
CAPTURE_REQUESTS = 32
CAPTURE_TOKENS = CAPTURE_REQUESTS * TOKENS_PER_REQUEST
MAX_MODEL_LEN = {640: 70_000, 8192: 1_048_576}  # capacity = cdiv(len, 128) rounded to 128
BATCH_MAX_CONTEXTS = {
    640: (3_000, 16_000, 30_000, 70_000, 9_000, 33_000),
    8192: (3_000, 30_000, 200_000, 1_048_576, 60_000, 500_000),
}


@triton.jit
def _frozen_consumer_kernel(idx_ptr, row_stride, lens_ptr, out_ptr, width, BLOCK: tl.constexpr):
    """What FlashMLA's captured decode does with the indices: read topk_length of each row."""
    row = tl.program_id(0)
    n = tl.load(lens_ptr + row)
    for start in range(0, width, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        vals = tl.load(idx_ptr + row.to(tl.int64) * row_stride + cols, mask=cols < n, other=-1)
        tl.store(out_ptr + row.to(tl.int64) * width + cols, vals, mask=cols < width)


def _active_width(max_context: int, capacity: int) -> int:
    """vLLM's adaptive width (#50004, #52823): next pow2 of max_seq_len // 128, in [128, C]."""
    return min(max(triton.next_power_of_2(max(max_context // COMPRESS_RATIO, 1)), 128), capacity)


class Server:
    """Persistent buffers + block table, like one DSV4 C128A attention layer's builder."""

    def __init__(self, capacity: int, gen: torch.Generator):
        self.capacity = capacity
        self.gen = gen
        rows = CAPTURE_TOKENS + 64
        self.decode = torch.full((rows, capacity), -7, dtype=torch.int32, device="cuda")
        self.lens = torch.zeros(rows, dtype=torch.int32, device="cuda")
        self.prefill = torch.full((rows, capacity), -7, dtype=torch.int32, device="cuda")
        self.out = torch.empty((CAPTURE_TOKENS, capacity), dtype=torch.int32, device="cuda")

    def batch(self, num_requests: int, max_context: int):
        """Decode tokens of ``num_requests`` requests (contexts mixed up to ``max_context``),
        padded to the captured size with slot_mapping -1, as vLLM pads a FULL-graph batch."""
        low = min(2_000, max_context // 2)
        contexts = torch.randint(low, max_context + 1, (num_requests,), generator=self.gen)
        contexts[0] = max_context
        positions, reqs, slots = [], [], []
        for req, ctx in enumerate(contexts.tolist()):
            for t in range(TOKENS_PER_REQUEST):
                positions.append(ctx - TOKENS_PER_REQUEST + t)
                reqs.append(req)
                slots.append(req * 1_000 + t)
        pad = CAPTURE_TOKENS - len(positions)
        positions += [0] * pad
        reqs += [0] * pad
        slots += [-1] * pad
        blocks_per_req = -(-self.capacity // BLOCK_SIZE)
        # Unique block ids: a misplaced row can never read the right slot ids by chance.
        table = torch.randperm(CAPTURE_REQUESTS * blocks_per_req, generator=self.gen)
        table = table.view(CAPTURE_REQUESTS, blocks_per_req)[:num_requests]
        return (
            torch.tensor(positions, dtype=torch.int64, device="cuda"),
            torch.tensor(reqs, dtype=torch.int32, device="cuda"),
            table.to(torch.int32).cuda(),
            torch.tensor(slots, dtype=torch.int64, device="cuda"),
            _active_width(max_context, self.capacity),
            num_requests * TOKENS_PER_REQUEST,
        )

    def build(self, layout: str, batch):
        positions, reqs, table, slots, width, _ = batch
        return builder(layout, impl="triton")(
            positions, COMPRESS_RATIO, positions.shape[0], reqs, table, BLOCK_SIZE, slots,
            self.decode, self.lens, self.prefill, max_compressed_tokens=width,
        )

    def expected(self, batch) -> torch.Tensor:
        """The truth, from the torch reference at capacity into scratch buffers."""
        positions, reqs, table, slots, width, _ = batch
        scratch = [torch.empty_like(self.decode), torch.empty_like(self.lens),
                   torch.empty_like(self.prefill)]
        decode, lens, _ = builder(CAPACITY, impl="torch")(
            positions, COMPRESS_RATIO, positions.shape[0], reqs, table, BLOCK_SIZE, slots,
            *scratch, max_compressed_tokens=width,
        )
        cols = torch.arange(self.capacity, device="cuda")
        return torch.where(cols < lens.unsqueeze(1), decode, -1)


def _capture_consumer(server: Server, layout: str) -> torch.cuda.CUDAGraph:
    full = server.batch(CAPTURE_REQUESTS, MAX_MODEL_LEN[server.capacity])
    decode, lens, _ = server.build(layout, full)  # capture-time build: full width
    assert decode.stride(0) == server.capacity

    def launch():
        _frozen_consumer_kernel[(CAPTURE_TOKENS,)](
            decode, decode.stride(0), lens, server.out, server.capacity, BLOCK=1024
        )

    launch()  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    return graph


@pytest.mark.parametrize("capacity", [8192, 640])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_captured_consumer_reads_the_right_slots(layout, capacity):
    gen = torch.Generator().manual_seed(52448)
    server = Server(capacity, gen)
    graph = _capture_consumer(server, layout)
    report = []
    for i, max_context in enumerate(BATCH_MAX_CONTEXTS[capacity] * 2):
        num_requests = (3, 10, 17, 32, 24, 12)[i % 6]
        batch = server.batch(num_requests, max_context)
        server.build(layout, batch)
        graph.replay()
        torch.cuda.synchronize()
        want = server.expected(batch)
        bad_rows = (server.out != want).any(dim=1)
        corrupted = int(bad_rows.sum())
        width, real_rows = batch[4], batch[5]
        report.append((num_requests, max_context, width, corrupted))
        assert not bool(bad_rows[0]), "row 0 always lines up"
        if layout in (CAPACITY, PREFIX) or width == capacity:
            assert corrupted == 0, (layout, capacity, max_context, width, corrupted)
        else:
            assert corrupted > 0, (layout, capacity, max_context, width)
            assert not bool(bad_rows[real_rows:].any()), "padded rows have length 0"
    total = sum(r[3] for r in report)
    print(f"\n{layout:>8} capacity {capacity:>5}: {len(report)} replays, "
          f"{total} corrupted rows of {len(report) * CAPTURE_TOKENS}; "
          f"(requests, max context, width, corrupted): {report}")
    if layout == PACKED:
        assert total > 0
    else:
        assert total == 0


def test_the_kernel_never_recompiles_across_shapes():
    from server_patch.c128a import kernel

    gen = torch.Generator().manual_seed(7)
    server = Server(8192, gen)
    server.build(PREFIX, server.batch(3, 30_000))
    torch.cuda.synchronize()
    before = kernel.compiled_variant_count()
    assert before >= 1
    for layout in LAYOUTS:
        for num_requests, max_context in ((1, 2_000), (2, 70_000), (5, 33_000), (32, 1_048_576),
                                          (7, 500_000), (31, 9_000)):
            positions, reqs, table, slots, width, real = server.batch(num_requests, max_context)
            for num_decode in (real, real - 3, 1, 0):  # the rest count as prefill tokens
                builder(layout, impl="triton")(
                    positions[: real + 2], COMPRESS_RATIO, num_decode, reqs, table, BLOCK_SIZE,
                    slots, server.decode, server.lens, server.prefill,
                    max_compressed_tokens=width,
                )
    torch.cuda.synchronize()
    assert kernel.compiled_variant_count() == before


@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_kernel_matches_the_reference_at_real_sizes(layout):
    gen = torch.Generator().manual_seed(11)
    server = Server(8192, gen)
    positions, reqs, table, slots, width, real = server.batch(32, 33_000)
    num_decode = real - 16  # the last two requests' tokens are prefill tokens

    def run(impl):
        buffers = [
            torch.randint(-999, -2, t.shape, generator=torch.Generator().manual_seed(3),
                          dtype=torch.int32).cuda()
            for t in (server.decode, server.lens, server.prefill)
        ]
        out = builder(layout, impl=impl)(positions[:real], COMPRESS_RATIO, num_decode, reqs,
                                         table, BLOCK_SIZE, slots, *buffers,
                                         max_compressed_tokens=width)
        return buffers, out

    (ref_buffers, ref_out), (k_buffers, k_out) = run("torch"), run("triton")
    torch.cuda.synchronize()
    for a, b in zip(ref_buffers, k_buffers, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(ref_out, k_out, strict=True):
        assert a.shape == b.shape and a.stride() == b.stride() and torch.equal(a, b)


def test_prefix_decode_view_follows_the_device():
    """Full-width contiguous decode rows on SM120 (FlashInfer), the [:n, :W] prefix elsewhere."""
    gen = torch.Generator().manual_seed(1)
    server = Server(640, gen)
    batch = server.batch(4, 9_000)
    decode, _, prefill = server.build(PREFIX, batch)
    sm120 = torch.cuda.get_device_capability()[0] == 12
    assert layouts.needs_contiguous_decode(decode.device) is sm120
    assert decode.shape[1] == (640 if sm120 else batch[4])
    assert prefill.shape[1] == batch[4]
    assert decode.stride(0) == 640


def test_the_warm_up_compiles_the_one_variant_every_build_then_uses():
    """In a fresh process: warm_up() compiles one variant, and builds of every layout,
    shape and view alignment afterwards neither compile another nor miss the lean path."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import torch
        from server_patch.c128a import LAYOUTS, builder, kernel
        kernel.warm_up()
        assert kernel.compiled_variant_count() == 1, kernel.compiled_variant_count()
        dec = torch.full((300, 640), -7, dtype=torch.int32, device="cuda")
        lens = torch.zeros(300, dtype=torch.int32, device="cuda")
        pre = torch.full((300, 640), -7, dtype=torch.int32, device="cuda")
        table = torch.randint(0, 1 << 20, (40, 320), dtype=torch.int32, device="cuda")
        for layout in LAYOUTS:
            for n, width, skip in ((8, 128, 0), (64, 512, 1), (255, 640, 3), (1, 256, 0)):
                positions = torch.randint(0, 80_000, (n + skip,), device="cuda")[skip:]
                reqs = (torch.arange(n + skip, device="cuda", dtype=torch.int32) // 8)[skip:]
                slots = torch.arange(n + skip, device="cuda")[skip:]  # views off 16 bytes
                for num_decode in (n, n // 2, 0):
                    builder(layout, impl="triton")(positions, 128, num_decode, reqs, table, 2,
                                                   slots, dec, lens, pre,
                                                   max_compressed_tokens=width)
        torch.cuda.synchronize()
        assert kernel.compiled_variant_count() == 1, kernel.compiled_variant_count()
        assert kernel.LAUNCHER.cached_devices() == (torch.cuda.current_device(),)
        print("one variant")
    """)
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "one variant" in done.stdout


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_lean_launch_writes_what_tritons_launch_writes(layout):
    from server_patch.c128a import kernel

    gen = torch.Generator().manual_seed(23)
    server = Server(640, gen)
    try:
        for num_requests, max_context in ((1, 2_000), (9, 33_000), (32, 70_000)):
            positions, reqs, table, slots, width, real = server.batch(num_requests, max_context)
            outcomes = []
            for lean in (False, True, True):
                kernel.LAUNCHER.lean = lean
                buffers = [torch.randint(-999, -2, t.shape, dtype=torch.int32,
                                         generator=torch.Generator().manual_seed(5)).cuda()
                           for t in (server.decode, server.lens, server.prefill)]
                views = builder(layout, impl="triton")(
                    positions[: real + 5], COMPRESS_RATIO, real, reqs, table, BLOCK_SIZE,
                    slots, *buffers, max_compressed_tokens=width)
                torch.cuda.synchronize()
                outcomes.append((buffers, views))
            for buffers, views in outcomes[1:]:
                for a, b in zip(outcomes[0][0] + list(outcomes[0][1]), buffers + list(views),
                                strict=True):
                    assert a.shape == b.shape and a.stride() == b.stride() and torch.equal(a, b)
    finally:
        kernel.LAUNCHER.lean = True
    assert kernel.LAUNCHER.cached_devices()


def test_a_launch_hook_sees_our_launches():
    """Profilers hook Triton's launches; the lean path must not hide ours from them."""
    from server_patch.c128a import kernel

    seen = []
    gen = torch.Generator().manual_seed(3)
    server = Server(640, gen)
    batch = server.batch(4, 9_000)
    server.build(PREFIX, batch)  # compiled and cached: the next launch would be lean
    hook = lambda metadata: seen.append(metadata.get()["name"])  # noqa: E731
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        server.build(PREFIX, batch)
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    torch.cuda.synchronize()
    assert seen == [kernel.c128a_metadata_kernel.fn.__name__]  # exactly our one launch
