"""Drive the sim's engine directly (no HTTP): a closed loop of clients whose requests differ.

Each request draws (from its seed) what it asks, so its script's length differs, its
`max_tokens` and its prompt length: starts and finishes interleave, steps mix decode
and prefill tokens, and two seeds give two different runs. Imports only server_patch
(torch), so the GPU tests can use it on a bare GPU host.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from server_patch.c128a import C128ABuilder
from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine, EngineStats, SimRequest
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


@dataclass
class Driven:
    """An engine after a run, and its requests in the order they were sent."""

    engine: Engine
    requests: list[SimRequest] = field(default_factory=list)

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    @property
    def lost(self) -> list[bool]:
        return [r.reply.lost for r in self.requests]


def drive(layout: str, concurrency: int, requests: int, *, device: str = "cpu", seed: int = 0,
          build: C128ABuilder | None = None, **config: Any) -> Driven:
    """`concurrency` clients, each sending its next request when the last one finishes."""
    rng = random.Random(seed)
    cfg = SimConfig(**{"layout": layout, "device": device, "max_num_seqs": 32,
                       "max_model_len": 2048, **config})
    run = Driven(Engine(cfg, build))
    engine = run.engine

    def submit() -> None:
        messages = [{"role": "user", "content": rng.choice(ASKS)}]
        reply = Reply(make_script(messages, None), rng.choice(MAX_TOKENS))
        request = engine.new_request(rng.choice(PROMPT_TOKENS), reply)
        engine.add(request)
        run.requests.append(request)

    for _ in range(concurrency):
        submit()
    while engine.has_work():
        before = engine.stats.finished_requests
        engine.step()
        for _ in range(engine.stats.finished_requests - before):
            if len(run.requests) < requests:
                submit()
    return run
