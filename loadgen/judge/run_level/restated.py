"""`reasoning_loop` by meaning, judged in the run-level pass.

A loop that restates itself in other words, counts on, or writes its answer again and
again (`judge.reply.restatement`) is found by comparing the reply's sentences with each
other. On a long reply that costs several times the rest of the per-reply rules, and
those run in the load generator's loop as each reply completes, where a judge that
slows the client down bends what the run measures. So this rule reads each completed
record once in the counting pass over records.jsonl (`judge.gate.aggregate`), like the other
run-level rules, and adds `reasoning_loop` where a reply went round in meaning; a
reply whose loop its request asked for ("say it ten times") is spared, as the
verbatim rule spares it.

Identical replies are judged once: greedy requests of one body (a run sends an item
many times) come back word for word alike, and what the search finds depends on the
texts, whether the reply finished, and the request's values alone. The last
`SAME_REPLIES` distinct replies are remembered with what was found in them.
"""

from __future__ import annotations

from loadgen.judge.reply.asked import loop_was_asked
from loadgen.judge.reply.loops import (
    FINISHED,
    LoopFinding,
    LoopKnobs,
    find_meaning_loop,
    request_values,
)
from loadgen.judge.run_level import Revision, completed
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict

#: Distinct replies remembered with the loop found in them (the oldest is let go first).
SAME_REPLIES = 256


class Restated:
    """The rule: loops by meaning in completed replies of any phase."""

    name = "restated"

    def __init__(self, cfg: LoopKnobs) -> None:
        self._cfg = cfg
        self._found: dict[int, Revision] = {}
        #: (cut, reasoning, content, the request's values) -> the loop found, if any.
        self._seen: dict[tuple[bool, str | None, str | None, tuple[str, ...]],
                         LoopFinding | None] = {}

    def observe(self, record: RequestRecord, own: list[str]) -> None:
        if not completed(own) or Verdict.REASONING_LOOP.value in own:
            return  # no reply to judge, or its loop is already said
        loop = self._loop(record)
        if loop is None or loop_was_asked(loop, record.params.get("asked_repetition")):
            return
        self._found[record.seq] = Revision(add={Verdict.REASONING_LOOP},
                                           findings={"loop": loop.model_dump(mode="json")})

    def _loop(self, record: RequestRecord) -> LoopFinding | None:
        """`find_meaning_loop` of the record, once for replies alike in all it reads."""
        reasoning, content = record.reasoning, record.content
        if not (isinstance(reasoning, str | None) and isinstance(content, str | None)):
            return find_meaning_loop(record, self._cfg)  # another writer's: as it comes
        key = (record.finish_reason not in FINISHED, reasoning, content,
               tuple(request_values(record)))
        if key in self._seen:
            return self._seen[key]
        loop = self._seen[key] = find_meaning_loop(record, self._cfg)
        if len(self._seen) > SAME_REPLIES:
            del self._seen[next(iter(self._seen))]
        return loop

    def revisions(self) -> dict[int, Revision]:
        return dict(self._found)

    def summary(self) -> None:
        return None
