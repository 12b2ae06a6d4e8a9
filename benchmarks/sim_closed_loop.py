"""A shipped scenario's load on the sim's engine, without HTTP: who was lost, in order.

The benchmarks that ask what the sim's mechanism gives over a whole run (the time
profile, the gate's power) need thousands of requests; through the load generator and
HTTP every token is an SSE chunk and a run of 1024 takes minutes on two cores. This
drives the engine the way the sim's API does (the scenario's workload bodies, counted
and scripted by the sim's own functions), as a closed loop of `concurrency` clients:
each sends its next request when its last one ends, so send order is request order.
What comes back is each request's fate, in send order: the engine decided it from what
the request's rows read, nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator

from loadgen.scenario import Scenario
from loadgen.workload import make_workload
from server_patch.sim.closed_loop import ClosedLoopRun, run_closed_loop
from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine
from server_patch.sim.model import Reply, Script, count_tokens, make_script, render_prompt


def scenario_requests(scenario: Scenario) -> Iterator[tuple[int, Script]]:
    """(prompt tokens, healthy script) of each request the scenario's workload sends,
    as the sim's API counts and scripts them."""
    for item in make_workload(scenario).items():
        yield (count_tokens(render_prompt(item.messages, item.tools)),
               make_script(item.messages, item.tools))


def run_scenario_loop(cfg: SimConfig, requests: Iterator[tuple[int, Script]], *,
                      concurrency: int, count: int, max_tokens: int) -> ClosedLoopRun:
    """`count` of the scenario's requests at `concurrency` in flight on a cold engine."""
    def next_request() -> tuple[int, Reply]:
        prompt_tokens, script = next(requests)
        return prompt_tokens, Reply(script, max_tokens)

    return run_closed_loop(Engine(cfg), next_request, concurrency=concurrency, count=count)


def buckets(flags: list[bool], size: int) -> list[tuple[int, int, int]]:
    """(first request, requests, failed) per bucket of `size` in request order."""
    return [(i, len(flags[i:i + size]), sum(flags[i:i + size]))
            for i in range(0, len(flags), size)]
