"""The sim on a GPU: the decode consumer is a real CUDA graph captured at start-up.

Marker `gpu`; skipped without CUDA. Imports only torch, triton and server_patch, so it
runs on a GPU host with nothing else installed (PYTHONPATH=. python -m pytest -m gpu).
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():  # pragma: no cover - CPU machines
    pytest.skip("needs CUDA", allow_module_level=True)

from server_patch.sim.consumer import CudaGraphConsumer  # noqa: E402
from server_patch.sim.engine import Engine  # noqa: E402
from tests.sim.drive import drive as drive_engine  # noqa: E402


def drive(layout: str, concurrency: int, requests: int) -> Engine:
    engine = drive_engine(layout, concurrency, requests, device="cuda")
    assert isinstance(engine.consumer, CudaGraphConsumer)  # a real graph, not the CPU reader
    return engine


@pytest.mark.parametrize("layout", ["capacity", "prefix"])
def test_graph_replay_reads_right_rows_under_capacity_and_prefix(layout: str) -> None:
    engine = drive(layout, concurrency=16, requests=48)
    st = engine.stats
    print(f"{layout}: steps {st.steps} (graph replays {st.pure_decode_steps}), "
          f"misread rows {st.misread_rows}, lost requests {st.corrupted_requests}")
    assert st.finished_requests == 48 and st.pure_decode_steps > 50
    assert st.misread_rows == 0 and st.corrupted_requests == 0


def test_graph_replay_misreads_rows_under_packed() -> None:
    engine = drive("packed", concurrency=16, requests=48)
    st = engine.stats
    print(f"packed: steps {st.steps} (graph replays {st.pure_decode_steps}), "
          f"misread rows {st.misread_rows}, lost requests {st.corrupted_requests}")
    assert st.corrupted_requests > 0 and st.misread_rows > 0


@pytest.mark.parametrize("layout", ["packed", "capacity", "prefix"])
def test_one_request_at_a_time_is_clean(layout: str) -> None:
    assert drive(layout, concurrency=1, requests=4).stats.misread_rows == 0
