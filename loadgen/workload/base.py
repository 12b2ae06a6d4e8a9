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


class Workload(Protocol):
    kind: str

    def items(self) -> Iterator[WorkItem]:
        """Yield items forever (cycling), the same sequence for the same seed."""
        ...
