"""A closed loop of clients on the sim's engine, without HTTP.

The tests and the benchmarks both ask what the mechanism does over many requests; HTTP
and SSE would make a run of a thousand take minutes. Each of `concurrency` clients sends
its next request when its last one ends, so send order is request order, as a load
generator's closed loop has it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from server_patch.sim.engine import Engine, EngineStats, SimRequest
from server_patch.sim.model import Reply

#: What a client sends next: (prompt tokens, the reply the model would give), and the
#: prompt's tokens where the run uses the prefix cache.
NextRequest = Callable[[], tuple[int, Reply] | tuple[int, Reply, list[str]]]


@dataclass
class ClosedLoopRun:
    """An engine after a run, and its requests in the order they were sent."""

    engine: Engine
    requests: list[SimRequest] = field(default_factory=list)

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    @property
    def lost(self) -> list[bool]:
        """Whether each request (in send order) was lost to what its rows read."""
        return [r.reply.lost for r in self.requests]


def run_closed_loop(engine: Engine, next_request: NextRequest, *, concurrency: int,
                    count: int) -> ClosedLoopRun:
    """`count` requests, `concurrency` in flight, until the engine has no work left."""
    run = ClosedLoopRun(engine)

    def submit() -> None:
        prompt_tokens, reply, *tokens = next_request()
        request = engine.new_request(prompt_tokens, reply, tokens[0] if tokens else None)
        engine.add(request)
        run.requests.append(request)

    for _ in range(min(concurrency, count)):
        submit()
    while engine.has_work():
        before = engine.stats.finished_requests
        engine.step()
        for _ in range(engine.stats.finished_requests - before):
            if len(run.requests) < count:
                submit()
    return run
