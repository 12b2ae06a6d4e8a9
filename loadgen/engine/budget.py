"""A phase's budget of infrastructure errors: stop sending once the gate cannot pass.

The gate makes a run invalid when a phase's infrastructure errors (http_error,
timeout, stream_error) exceed `gate.max_infra_errors`, in priming (`priming_check`)
and in the measurement alike. They only add up, so once one more than that has come
back no later reply can make the run valid, and sending the rest would spend the
server's time for nothing (512 requests answered HTTP 400 one after the other, a
bound printed at the end). The phase stops at once with a reason that names the
count, the limit and the first error; the requests still in flight end as
`interrupted` with that reason (they never finished: they count neither way, and
waiting for them could take a stuck reply's whole total timeout). The reference phase
has no limit of its own in the gate, so none here.

A server that goes away mid-run (`engine.outage`) breaks the streams in flight: those
count here as they count in the gate (a restart the scenario lets the run survive needs
a `max_infra_errors` that covers them, as it always did), but the outage watch speaks
first: the run stops once its check of the server is done, so a server that went away
ends the run with that reason (`on_server_restart = "invalid"`, or never back), and one
that came back is recorded as a restart before the budget stops the phase.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.scenario import Scenario
from loadgen.taxonomy import counts_as_infra_error

#: The phases whose infrastructure errors the gate limits.
LIMITED_PHASES = ("priming", "measurement")
FIRST_ERROR_CHARS = 300


class InfraBudget:
    """Counts one phase's infrastructure errors against the gate's limit."""

    def __init__(self, phase: str, limit: int | None) -> None:
        self.phase = phase
        self.limit = limit
        self.errors = 0
        self.first: str | None = None

    @classmethod
    def for_phase(cls, scenario: Scenario, phase: str) -> InfraBudget:
        limit = scenario.gate.max_infra_errors if phase in LIMITED_PHASES else None
        return cls(phase, limit)

    def spent(self, verdicts: Sequence[str], error: str | None, seq: int,
              endpoint: str) -> str | None:
        """Count one finished request; the reason to stop the phase when the errors are
        past the limit (every time: the stop keeps its first reason)."""
        if not counts_as_infra_error(verdicts):
            return None
        self.errors += 1
        if self.first is None:
            what = (error or verdicts[0])[:FIRST_ERROR_CHARS]
            self.first = f"{what} (seq {seq}, {endpoint})"
        if self.limit is None or self.errors <= self.limit:
            return None
        return self.reason()

    def reason(self) -> str:
        errors = "error" if self.errors == 1 else "errors"
        return (f"{self.phase} stopped early: {self.errors} infrastructure {errors} "
                f"(http_error/timeout/stream_error), more than the {self.limit} "
                f"gate.max_infra_errors allows, so no later reply could make this run "
                f"valid; the first: {self.first}")
