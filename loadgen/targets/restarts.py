"""Which server start each endpoint was on, from one round of a soak to the next.

A round on a server that started anew primes again (the bug shows under load that
follows a fresh start's warm-up; a measured round on a cold server would say nothing of
it), and a round on the same start does not. The soak keeps one `StartTracker`: it
looks before each round, learns from each round's server.json after it, and picks up
where a stopped soak left off from the starts its history recorded.
"""

from __future__ import annotations

from loadgen.targets.epochs import (
    EndpointLooks,
    Observation,
    detect_restart,
    last_seen,
    observe,
    restarted_during,
)


class StartTracker:
    """What is known of each endpoint's start; nothing at first (so: prime)."""

    def __init__(self) -> None:
        self.previous: dict[str, Observation] | None = None
        self.restarted_in_round = False

    def resume(self, starts: dict[str, float | None], looks: dict[str, EndpointLooks]
               ) -> None:
        """Continue from the last recorded round: its start times by URL, and what its
        server.json saw (none when unreadable). Without a start time or a server id
        nothing can tell whether the server restarted meanwhile: the next round primes."""
        seen = last_seen(looks, {url: Observation(url, True, start)
                                 for url, start in starts.items()})
        known = any(o.start_time is not None or o.server_id for o in seen.values())
        self.previous = seen if known else None

    def before_round(self, base_urls: list[str], verify_tls: bool
                     ) -> tuple[list[str], list[Observation]]:
        """Look at every endpoint: (why this round must prime, empty if it need not;
        what was seen, for `after_round` and the history)."""
        observations = [observe(u, verify_tls) for u in base_urls]
        reasons = list(detect_restart(self.previous, observations).reasons)
        if self.restarted_in_round:
            reasons.append("the server restarted during the previous round")
        return reasons, observations

    def after_round(self, looks: dict[str, EndpointLooks], runner_saw_restart: bool,
                    observations: list[Observation]) -> None:
        """Learn from what the round saw of each start: a restart while it ran (the runner
        saw the server go, or its start moved) makes the next round prime."""
        self.restarted_in_round = runner_saw_restart or restarted_during(looks)
        self.previous = last_seen(looks, {o.base_url: o for o in observations})
