"""What every workload hands the runner: an endless, deterministic stream of items."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from loadgen.expectations import Expectation


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One request's messages (and tools); the runner adds model and sampling params.

    `body` holds extra keys a replayed production request carried; they are sent as
    they are, except model/stream keys the runner must own to measure.
    """

    item_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    body: dict[str, Any] = field(default_factory=dict)
    approx_prompt_tokens: int = 0
    #: The healthy reply is a tool call (the workload asks for one); the verdicts hold a
    #: reply without one against it.
    expects_tool_call: bool = False
    #: The request's own facts and what a correct reply does with them (None: unknown).
    expected: Expectation | None = None
    #: Reasoning switched on or off for this request (None: as the scenario sends it),
    #: through the chat template's switch (`request.reasoning_switch`).
    reasoning: bool | None = None
    #: What kind of request this is, for the reports' breakdowns (`probe`: "needle",
    #: "echo"...; a session turn's `turn`: "tool-loop" or "user-turn"; its
    #: `prefix_tokens`): recorded in the record's params (`tags`).
    tags: dict[str, str] = field(default_factory=dict)
    #: A turn of a conversation: the unit it belongs to and how it is sent (None: a
    #: request on its own).
    turn: Turn | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """Where a request sits in its conversation. A conversation's turns are consecutive
    seqs, sent in order by one worker, each after the previous reply and `think_s`
    seconds of think time (`engine.phase`)."""

    session: str
    index: int  # 0 for the first turn
    count: int  # turns in the conversation
    think_s: float = 0.0  # pause before this turn is sent (none before the first)


class Workload(Protocol):
    kind: str

    def items(self) -> Iterator[WorkItem]:
        """Yield items forever (cycling), the same sequence for the same seed."""
        ...


class Cycled:
    """A workload whose items are one list, built once and then repeated forever."""

    def items(self) -> Iterator[WorkItem]:
        built = self._build()
        while True:
            yield from built

    def _build(self) -> list[WorkItem]:
        raise NotImplementedError
