"""Fixtures for the server_patch tests: C128A cases, an oracle, a fake vLLM.

Without CUDA, the Triton kernel runs in Triton's CPU interpreter, which is
chosen when the kernel is decorated; so TRITON_INTERPRET is set here, before
any test imports the kernel module. With CUDA the kernel tests run on the GPU
instead (and the GPU-only tests in test_c128a_gpu.py need the real compiler).
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- C128A cases


@dataclass
class C128ACase:
    """One builder call's inputs, and fresh persistent buffers full of garbage."""

    positions: torch.Tensor
    compress_ratio: int
    num_decode_tokens: int
    token_to_req_indices: torch.Tensor
    block_table: torch.Tensor
    block_size: int
    slot_mapping: torch.Tensor
    rows: int
    capacity: int
    width: int
    seed: int

    @property
    def num_prefill_tokens(self) -> int:
        return self.positions.shape[0] - self.num_decode_tokens

    def buffers(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Persistent buffers pre-filled with values no builder writes (< -1).

        Same seed, same garbage: two implementations can be compared element
        by element, including what they must leave untouched.
        """
        gen = torch.Generator().manual_seed(self.seed)
        device = self.positions.device

        def garbage(*shape: int) -> torch.Tensor:
            return torch.randint(-999, -2, shape, generator=gen, dtype=torch.int32).to(device)

        return garbage(self.rows, self.capacity), garbage(self.rows), garbage(
            self.rows, self.capacity
        )

    def call(
        self, fn: Callable[..., tuple[torch.Tensor, ...]], buffers: tuple[torch.Tensor, ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        decode, lens, prefill = buffers
        return fn(
            self.positions,
            self.compress_ratio,
            self.num_decode_tokens,
            self.token_to_req_indices,
            self.block_table,
            self.block_size,
            self.slot_mapping,
            decode,
            lens,
            prefill,
            max_compressed_tokens=self.width,
        )


def make_case(
    seed: int,
    *,
    device: str | torch.device = "cpu",
    capacity: int = 24,
    width: int | None = None,
    block_size: int = 2,
    compress_ratio: int = 128,
    decode_reqs: int = 2,
    tokens_per_req: int = 2,
    prefill_tokens: int = 2,
    padded_decode: int = 0,
    disjoint_blocks: bool = False,
    positions_below: int | None = None,
) -> C128ACase:
    """A random batch: decode requests of consecutive tokens (1 + spec tokens), then prefill.

    Positions range past the capacity (clamped) and below one compressed
    block (no entries); ``padded_decode`` extra decode tokens carry
    slot_mapping -1, as CUDA-graph padding does. ``disjoint_blocks`` gives each
    request its own block-id range, so no two requests share a slot id.
    ``positions_below`` bounds the positions (e.g. to what an active width
    covers, as vLLM guarantees) and keeps them at least one compressed block in.
    """
    gen = torch.Generator().manual_seed(seed)

    def randint(low: int, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=gen, dtype=torch.int64)

    width = capacity if width is None else width
    max_pos = (capacity + 3) * compress_ratio if positions_below is None else positions_below
    min_pos = 0 if positions_below is None else compress_ratio + tokens_per_req
    positions: list[int] = []
    token_to_req: list[int] = []
    slots: list[int] = []
    for req in range(decode_reqs):
        last = int(randint(min_pos, max_pos, (1,)))
        start = max(last - tokens_per_req + 1, 0)
        for pos in range(start, start + tokens_per_req):
            positions.append(pos)
            token_to_req.append(req)
            slots.append(int(randint(0, 10_000, (1,))))
    for _ in range(padded_decode):
        positions.append(int(randint(0, max_pos, (1,))))
        token_to_req.append(int(randint(0, max(decode_reqs, 1), (1,))))
        slots.append(-1)
    num_decode = len(positions)
    for _ in range(prefill_tokens):
        positions.append(int(randint(0, max_pos, (1,))))
        token_to_req.append(decode_reqs)
        slots.append(int(randint(-1, 10_000, (1,))))

    blocks_per_req = -(-capacity // block_size) + 3  # wider than needed: stride != width
    if disjoint_blocks:
        base = torch.arange(max(decode_reqs, 1), dtype=torch.int64).unsqueeze(1) * 100_000
        table = base + randint(0, 100_000, (max(decode_reqs, 1), blocks_per_req))
    else:
        table = randint(0, 5_000, (max(decode_reqs, 1) + 2, blocks_per_req))
    return C128ACase(
        positions=torch.tensor(positions, dtype=torch.int64, device=device),
        compress_ratio=compress_ratio,
        num_decode_tokens=num_decode,
        token_to_req_indices=torch.tensor(token_to_req, dtype=torch.int32, device=device),
        block_table=table.to(torch.int32).to(device)[: max(decode_reqs, 1)],
        block_size=block_size,
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=device),
        rows=num_decode + prefill_tokens + 3,
        capacity=capacity,
        width=width,
        seed=seed,
    )


def oracle(case: C128ACase, width: int) -> tuple[list[list[int]], list[int], list[list[int]]]:
    """The issue's semantics, one token and one column at a time (no torch tricks).

    Decode row: global slot ids of compressed positions below
    min((pos + 1) // ratio, width), -1 after; length 0 when slot_mapping < 0.
    Prefill row: 0..n-1, then -1.
    """
    positions = case.positions.tolist()
    reqs = case.token_to_req_indices.tolist()
    table = case.block_table.tolist()
    slot_mapping = case.slot_mapping.tolist()
    decode, lens, prefill = [], [], []
    for token, pos in enumerate(positions):
        n = max(min((pos + 1) // case.compress_ratio, width), 0)
        if token < case.num_decode_tokens:
            row = table[reqs[token]]
            decode.append(
                [
                    row[c // case.block_size] * case.block_size + c % case.block_size
                    if c < n
                    else -1
                    for c in range(width)
                ]
            )
            lens.append(n if slot_mapping[token] >= 0 else 0)
        else:
            prefill.append([c if c < n else -1 for c in range(width)])
    return decode, lens, prefill


@pytest.fixture
def device() -> str:
    """Where kernel tests run: the GPU when there is one, else the Triton interpreter."""
    return "cuda" if HAS_CUDA else "cpu"


@pytest.fixture
def case_factory() -> Callable[..., C128ACase]:
    return make_case


@pytest.fixture
def c128a_oracle() -> Callable[..., tuple[list[list[int]], list[int], list[list[int]]]]:
    return oracle


# --------------------------------------------------------------------------- fake vLLM

UPSTREAM_SIGNATURE = """\
def build_c128a_topk_metadata(
    positions,
    compress_ratio,
    num_decode_tokens,
    token_to_req_indices,
    block_table,
    block_size,
    slot_mapping,
    global_decode_buffer,
    decode_lens_buffer,
    prefill_buffer,
    max_compressed_tokens: int = 8192,
):
"""

# Upstream's two real behaviours, in plain torch: capacity (0.26.0, 0.28.0)
# and packed (0.27.x: rows at the active width, views over the flat buffer).
FAKE_BODIES = {
    "capacity": """\
    n_tok = positions.shape[0]
    n_pre = n_tok - num_decode_tokens
    return (global_decode_buffer[:num_decode_tokens], decode_lens_buffer[:num_decode_tokens],
            prefill_buffer[:n_pre])
""",
    "packed": """\
    n_tok = positions.shape[0]
    n_pre = n_tok - num_decode_tokens
    w = max_compressed_tokens
    dec = global_decode_buffer.view(-1)[: num_decode_tokens * w].view(num_decode_tokens, w)
    pre = prefill_buffer.view(-1)[: n_pre * w].view(n_pre, w)
    dec.fill_(-1)
    return dec, decode_lens_buffer[:num_decode_tokens], pre
""",
}

WRONG_SIGNATURE = """\
def build_c128a_topk_metadata(
    positions, compress_ratio, num_decode_tokens, actual_num_query_tokens,
    token_to_req_indices, block_table, block_size, slot_mapping,
    global_decode_buffer, decode_lens_buffer, prefill_buffer,
    max_compressed_tokens: int = 8192, dcp_world_size: int = 1,
):
    raise AssertionError("a fork's builder must never be replaced")
"""

# How upstream's metadata builder reaches the function: by module-global name,
# at call time. This is what makes replacing the global enough. The builder class
# stands in for DeepseekV4SparseMLAMetadataBuilder: its compress ratio, and the
# capacity width of a C128A one.
CALLER = """

def _build_c128a_metadata(*args, **kwargs):
    return build_c128a_topk_metadata(*args, **kwargs)


class DeepseekV4SparseMLAMetadataBuilder:
    def __init__(self, compress_ratio=128, max_model_len=65536):
        self.compress_ratio = compress_ratio
        if compress_ratio == 128:
            self.c128a_max_compressed = -(-max_model_len // 128)

    def _build_c128a_metadata(self, *args, **kwargs):
        return build_c128a_topk_metadata(*args, **kwargs)


class DeepseekV4FlashMLAMetadataBuilder(DeepseekV4SparseMLAMetadataBuilder):
    pass
"""

# Where every vLLM model loader passes: the process that loads the model.
FAKE_BASE_LOADER = """\
class BaseModelLoader:
    def load_model(self, vllm_config, model_config, prefix=""):
        return object()
"""

# A stand-in for vllm.plugins: load each general plugin and call it, and, more
# forgiving than vLLM itself, swallow any Exception from loading *or* calling
# it. The plugin's strict mode must still stop the process.
FAKE_PLUGINS = '''\
import logging
import os
from importlib.metadata import EntryPoint

logger = logging.getLogger("vllm.plugins")
plugins_loaded = False


def load_general_plugins():
    global plugins_loaded
    if plugins_loaded:
        return
    plugins_loaded = True
    for spec in filter(None, os.environ.get("FAKE_VLLM_GENERAL_PLUGINS", "").split(";")):
        name, value = spec.split("=", 1)
        try:
            func = EntryPoint(name=name, value=value, group="vllm.general_plugins").load()
            func()
        except Exception:
            logger.exception("Failed to load plugin %s", name)
'''


def write_fake_vllm(
    root: Path, *, version: str = "0.28.0", upstream: str = "capacity", with_target: bool = True,
    with_loader: bool = True,
) -> Path:
    """Write a fake ``vllm`` package under ``root`` and return the sys.path entry.

    ``upstream``: "capacity" or "packed" (a function with upstream's
    signature), or "wrong-signature" (a fork's extended one).
    """
    pkg = root / "vllm"
    (pkg / "plugins").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (pkg / "plugins" / "__init__.py").write_text(FAKE_PLUGINS)
    if with_loader:
        loader = pkg / "model_executor" / "model_loader"
        loader.mkdir(parents=True)
        (pkg / "model_executor" / "__init__.py").write_text("")
        (loader / "__init__.py").write_text("")
        (loader / "base_loader.py").write_text(FAKE_BASE_LOADER)
    if with_target:
        target = pkg / "models" / "deepseek_v4"
        target.mkdir(parents=True)
        (pkg / "models" / "__init__.py").write_text("")
        (target / "__init__.py").write_text("")
        if upstream == "wrong-signature":
            source = WRONG_SIGNATURE
        else:
            source = UPSTREAM_SIGNATURE + FAKE_BODIES[upstream]
        (target / "sparse_mla.py").write_text(textwrap.dedent(source) + CALLER)
    return root


def _forget_vllm() -> None:
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Path]]:
    """Install a fake vLLM for this test (in sys.path, fresh modules, clean plugin state)."""
    from server_patch import model_watch, plugin, server_start

    monkeypatch.setattr(plugin, "_STATE", plugin._State())
    model_watch._SEEN.reset()
    monkeypatch.setattr(model_watch, "_report", None)
    # Each test is a server start of its own: the id register() makes (and puts in the
    # environment for its children) goes away with the test.
    monkeypatch.setattr(server_start, "_CURRENT", {})
    for var in (
        "DSV4_QUAL_C128A_LAYOUT",
        "DSV4_QUAL_STRICT",
        "DSV4_QUAL_RECEIPT_DIR",
        "DSV4_QUAL_SUPPORTED_VLLM",
        "DSV4_QUAL_GUARD",
        "DSV4_QUAL_GUARD_FLUSH_S",
        server_start.ENV_SERVER_ID,
        server_start.ENV_SERVER_MAKER,
        server_start.ENV_SERVER_ADDRESS,
    ):
        monkeypatch.setenv(var, "")  # so that teardown removes what the test sets
        monkeypatch.delenv(var)
    _forget_vllm()

    def install(**kwargs: object) -> Path:
        root = write_fake_vllm(tmp_path / "fake", **kwargs)  # type: ignore[arg-type]
        monkeypatch.syspath_prepend(str(root))
        return root

    yield install
    _forget_vllm()


@pytest.fixture
def fake_vllm_writer() -> Callable[..., Path]:
    """``write_fake_vllm`` itself, for tests that run the fake in a subprocess."""
    return write_fake_vllm


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT
