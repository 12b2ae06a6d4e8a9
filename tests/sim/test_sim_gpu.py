"""The sim on a GPU: the consumers are real CUDA graphs captured at start-up.

Marker `gpu`; skipped without CUDA. Imports only torch, triton and server_patch, so it
runs on a GPU host with nothing else installed (PYTHONPATH=. python -m pytest -m gpu).
In both graph modes: `full_and_piecewise` replays the decode graph on pure-decode
steps; `full` replays the decode and the prefill graphs on every step. What each row
read, and whose KV it was, is judged alike on both devices, so every face of the bug
(lost, cross-talk, salad) is the CPU's.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():  # pragma: no cover - CPU machines
    pytest.skip("needs CUDA", allow_module_level=True)

from server_patch.sim.config import FULL, GRAPH_MODES  # noqa: E402
from server_patch.sim.consumer import CudaGraphConsumer, CudaGraphRows  # noqa: E402
from server_patch.sim.reads import dominant_owner  # noqa: E402
from tests.sim.drive import MIXED_BILLING, Driven  # noqa: E402
from tests.sim.drive import drive as drive_engine  # noqa: E402


def drive(layout: str, concurrency: int, requests: int, graph_mode: str) -> Driven:
    run = drive_engine(layout, concurrency, requests, device="cuda", graph_mode=graph_mode)
    graphs = run.engine.graphs
    assert isinstance(graphs.decode_consumer, CudaGraphConsumer)  # a real graph
    if graph_mode == FULL:
        assert isinstance(graphs.prefill_consumer, CudaGraphRows)
    else:
        assert graphs.prefill_consumer is None
    return run


def describe(layout: str, graph_mode: str, run: Driven) -> str:
    st = run.stats
    return (f"{layout} {graph_mode}: steps {st.steps} (graph replays {st.replayed_steps}, "
            f"mixed {st.mixed_steps}), misread rows {st.misread_rows} (prefill "
            f"{st.misread_prefill_rows}), lost requests {st.corrupted_requests}")


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
@pytest.mark.parametrize("layout", ["capacity", "prefix"])
def test_graph_replay_reads_right_rows_under_capacity_and_prefix(layout: str,
                                                                 graph_mode: str) -> None:
    run = drive(layout, 16, 48, graph_mode)
    st = run.stats
    print(describe(layout, graph_mode, run))
    assert st.finished_requests == 48 and st.pure_decode_steps > 50 and st.mixed_steps > 0
    assert st.replayed_steps == (st.steps if graph_mode == FULL else st.pure_decode_steps)
    assert st.misread_rows == 0 and st.corrupted_requests == 0


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
def test_graph_replay_misreads_rows_under_packed(graph_mode: str) -> None:
    run = drive("packed", 16, 48, graph_mode)
    st = run.stats
    print(describe("packed", graph_mode, run))
    assert st.corrupted_requests > 0 and st.misread_rows > 0
    # Only a captured mixed step reads the packed prefill rows at the capture stride.
    assert (st.misread_prefill_rows > 0) is (graph_mode == FULL)


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
@pytest.mark.parametrize("layout", ["packed", "capacity"])
def test_a_real_graph_reads_what_the_cpu_reader_reads(layout: str, graph_mode: str) -> None:
    """The CPU path is the same mechanism: the same run gives the same counts."""
    cuda = drive(layout, 16, 48, graph_mode).stats
    cpu = drive_engine(layout, 16, 48, device="cpu", graph_mode=graph_mode).stats
    assert cuda == cpu


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
@pytest.mark.parametrize("layout", ["packed", "capacity", "prefix"])
def test_one_request_at_a_time_reads_its_decode_rows_right(layout: str, graph_mode: str) -> None:
    st = drive(layout, 1, 4, graph_mode).stats
    assert st.misread_rows == st.misread_prefill_rows and st.corrupted_requests == 0
    # One request's prompt still has many prefill rows: a FULL graph misplaces them
    # under packed (its own indices, so nothing foreign is read).
    assert (st.misread_prefill_rows > 0) is (layout == "packed" and graph_mode == FULL)


def test_whose_kv_a_row_read_is_judged_alike_on_both_devices() -> None:
    generator = torch.Generator().manual_seed(0)
    owners = torch.randint(0, 6, (512, 96), generator=generator)  # ties aplenty
    cpu = dominant_owner(owners)
    cuda = dominant_owner(owners.cuda())
    assert torch.equal(cpu[0], cuda[0].cpu()) and torch.equal(cpu[1], cuda[1].cpu())


@pytest.mark.parametrize("graph_mode", GRAPH_MODES)
def test_every_face_on_cuda_is_the_face_on_the_cpu(graph_mode: str) -> None:
    """The same requests, one run on real graphs and one on the CPU readers: the same
    faces, from the same owners' KV, in the same replies."""
    cuda = drive_engine("packed", seed=1, device="cuda", graph_mode=graph_mode, **MIXED_BILLING)
    cpu = drive_engine("packed", seed=1, device="cpu", graph_mode=graph_mode, **MIXED_BILLING)
    assert cuda.stats == cpu.stats
    assert cuda.stats.cross_talk_requests > 0 and cuda.stats.salad_requests > 0
    assert [(r.reply.faces, r.faced_by) for r in cuda.requests] == \
        [(r.reply.faces, r.faced_by) for r in cpu.requests]


def _chats(count: int) -> list[tuple[list[dict[str, str]], None]]:
    """Sessions' first turns over one long shared system prompt: each asks for its own
    order, planted past the indexer shortcut's 2048 tokens (the sim's words are tokens)."""
    system = " ".join(f"Handbook rule {i} keeps every order and refund auditable."
                      for i in range(300))
    chats = []
    for k in range(count):
        order = f"ORD{k:03d}X{(k * 7) % 10}"
        user = (f"Hi, I'm Ana Lis{chr(97 + k % 26)}, customer number CUS{k:04d}Z. My order "
                f"{order} has not arrived yet. Can you look it up and tell me its tracking "
                "number?")
        chats.append(([{"role": "system", "content": system},
                       {"role": "user", "content": user}], None))
    return chats


def _sessions(device: str, indexer: str) -> tuple[object, list[str]]:
    from server_patch.sim.closed_loop import run_closed_loop
    from server_patch.sim.config import SimConfig
    from server_patch.sim.engine import Engine
    from server_patch.sim.model import Reply, make_script, render_prompt, tokenize

    sent = iter(_chats(24))

    def next_request() -> tuple[int, Reply, list[str]]:
        messages, tools = next(sent)
        tokens = tokenize(render_prompt(messages, tools))
        return len(tokens), Reply(make_script(messages, tools), 96), tokens

    cfg = SimConfig(device=device, max_model_len=8192, prefix_caching=True, indexer=indexer)
    run = run_closed_loop(Engine(cfg), next_request, concurrency=8, count=24)
    written = ["".join(r.reply.script.tool_arguments) for r in run.requests]
    return run.stats, written


@pytest.mark.parametrize("indexer", ["runtime", "captured"])
def test_the_prefix_cache_and_the_indexer_shortcut_are_the_cpus(indexer: str) -> None:
    """Shared blocks are judged the request's own on the GPU as on the CPU, and the
    captured shortcut alters the same facts of the same requests."""
    cuda, cuda_args = _sessions("cuda", indexer)
    cpu, cpu_args = _sessions("cpu", indexer)
    assert cuda == cpu and cuda_args == cpu_args
    assert cuda.prefix_cache_hits > 0 and cuda.misread_rows == 0
    assert (cuda.unselected_facts > 0) is (indexer == "captured")
    print(f"indexer {indexer}: prefix hits {cuda.prefix_cache_hits} of "
          f"{cuda.prefix_cache_queries} tokens, shortcut requests "
          f"{cuda.indexer_shortcut_requests}, altered facts {cuda.unselected_facts}")
