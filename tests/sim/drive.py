"""Drive the sim's engine directly (no HTTP): a closed loop of clients.

Imports only server_patch (torch), so the GPU tests can use it on a bare GPU host.
"""

from __future__ import annotations

import random

from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine
from server_patch.sim.model import Reply, make_script

MESSAGES = [{"role": "user", "content": "Please upgrade XEHM4B to business, then cancel it."}]
PROMPT_TOKENS = (40, 90, 300, 700)


def drive(layout: str, concurrency: int, requests: int, *, device: str = "cpu", seed: int = 0,
          max_tokens: int = 80) -> Engine:
    """`concurrency` clients, each sending its next request when the last one finishes."""
    rng = random.Random(seed)
    engine = Engine(SimConfig(layout=layout, device=device, max_num_seqs=32,
                              max_model_len=2048))
    sent = 0

    def submit() -> None:
        nonlocal sent
        reply = Reply(make_script(MESSAGES, None), max_tokens)
        engine.add(engine.new_request(rng.choice(PROMPT_TOKENS), reply))
        sent += 1

    for _ in range(concurrency):
        submit()
    while engine.has_work():
        before = engine.stats.finished_requests
        engine.step()
        for _ in range(engine.stats.finished_requests - before):
            if sent < requests:
                submit()
    return engine
