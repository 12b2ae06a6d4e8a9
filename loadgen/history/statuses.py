"""The words the history stores for a soak and for each of its rounds.

They are public (the history's columns, soak.json, `dsv4-qual history`, dashboards
over the fleet's database) and compared in several places, so each is named once here.
"""

from __future__ import annotations

from enum import StrEnum


class RoundStatus(StrEnum):
    """A round's row: written `running` when it starts, closed once."""

    RUNNING = "running"
    COMPLETE = "complete"  # the round ran to its end and was judged
    PARTIAL = "partial"  # interrupted, or its process died: judged on what it recorded


class SoakStatus(StrEnum):
    """A soak's row, and soak.json's `status`."""

    RUNNING = "running"
    FINISHED = "finished"  # its plan (rounds or duration) ran out, or a round sent nothing
    STOPPED_ON_BREACH = "stopped_on_breach"  # --stop-on-breach and a round's gate failed
    INTERRUPTED = "interrupted"
    EXPIRED = "expired"  # found unfinished after its duration had run out: closed
    ABANDONED = "abandoned"  # found unfinished when `soak --new` started another
