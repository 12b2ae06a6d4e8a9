"""The rules of one reply, one module per rule family, each declared there whole
(`family.Family`: its verdicts, knobs, findings and report sentences) and registered
here: `finish`, `loops` (+ `asked`: repetition the request asked for, `restatement`:
loops by meaning), `leaks`, `sequence`, `usage`, `garbled/` (token salad, one module a
detector), `tool_calls`, `substance` (+ `known_answers`) and `reply_language`; and what
a request gives reason for (`request_profile`, worked out once per body by the engine).

A rule reads one reply and its own request, never the run's other records: it imports
text helpers (`judge.text`) and other rules of one reply, never the run-level rules, the
gate or `verdicts` (the layers drawn in `loadgen.judge`). The families' knobs make the
scenario's `[verdicts]` section (`VerdictConfig`), so this package sits below the
scenario (the layers drawn in docs/architecture.md).
"""

from __future__ import annotations

from loadgen.judge.reply import (
    finish,
    garbled,
    leaks,
    loops,
    reply_language,
    sequence,
    substance,
    tool_calls,
    usage,
)
from loadgen.judge.reply.family import Family
from loadgen.judge.reply.garbled.knobs import GarbledKnobs
from loadgen.judge.reply.leaks import LeakKnobs
from loadgen.judge.reply.loops import LoopKnobs

#: The families of one reply, in the order `judge.verdicts.classify` applies them (the
#: order of a record's findings and of the report's lines).
FAMILIES: tuple[Family, ...] = (
    finish.FAMILY, loops.FAMILY, leaks.FAMILY, sequence.FAMILY, usage.FAMILY,
    garbled.FAMILY, tool_calls.FAMILY, substance.FAMILY, reply_language.FAMILY)


class VerdictConfig(LoopKnobs, LeakKnobs, GarbledKnobs):
    """Thresholds of the verdict rules; the defaults do not flag healthy reasoning.

    One flat section of the scenario (`[verdicts]`), made of the knobs each family
    declares (`Family.knobs`; a test holds that every declared group is here)."""

