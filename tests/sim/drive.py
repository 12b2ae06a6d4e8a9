"""Drive the sim's engine directly (no HTTP): a closed loop of clients whose requests differ.

Each request draws (from its seed) what it asks, so its script's length differs, its
`max_tokens` and its prompt length: starts and finishes interleave, steps mix decode
and prefill tokens, and two seeds give two different runs. Imports only server_patch
(torch), so the GPU tests can use it on a bare GPU host.
"""

from __future__ import annotations

import random
from typing import Any

from server_patch.c128a import C128ABuilder
from server_patch.sim.closed_loop import ClosedLoopRun, run_closed_loop
from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine
from server_patch.sim.model import Reply, make_script

ASKS = (
    "Please upgrade XEHM4B to business, then cancel it.",
    "Cancel QPRL7Z.",
    "Move account ZX81KQ to the free plan, and tell me what changes for the team, its "
    "invoices and its billing contact once the current period ends next month.",
    "Why was AB12CD charged twice this month?",
)
PROMPT_TOKENS = (40, 90, 300, 700)
MAX_TOKENS = (24, 48, 80, 160)


#: An engine after a run, and its requests in the order they were sent.
Driven = ClosedLoopRun


def drive(layout: str, concurrency: int, requests: int, *, device: str = "cpu", seed: int = 0,
          build: C128ABuilder | None = None, **config: Any) -> Driven:
    """`concurrency` clients, each sending its next request when the last one finishes."""
    rng = random.Random(seed)
    cfg = SimConfig(**{"layout": layout, "device": device, "max_num_seqs": 32,
                       "max_model_len": 2048, **config})

    def next_request() -> tuple[int, Reply]:
        messages = [{"role": "user", "content": rng.choice(ASKS)}]
        reply = Reply(make_script(messages, None), rng.choice(MAX_TOKENS))
        return rng.choice(PROMPT_TOKENS), reply

    return run_closed_loop(Engine(cfg, build), next_request, concurrency=concurrency,
                           count=requests)
