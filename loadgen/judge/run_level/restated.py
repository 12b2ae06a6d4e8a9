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
"""

from __future__ import annotations

from loadgen.judge.reply.asked import loop_was_asked
from loadgen.judge.reply.loops import LoopKnobs, find_meaning_loop
from loadgen.judge.run_level import Revision, completed
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict


class Restated:
    """The rule: loops by meaning in completed replies of any phase."""

    name = "restated"

    def __init__(self, cfg: LoopKnobs) -> None:
        self._cfg = cfg
        self._found: dict[int, Revision] = {}

    def observe(self, record: RequestRecord, own: list[str]) -> None:
        if not completed(own) or Verdict.REASONING_LOOP.value in own:
            return  # no reply to judge, or its loop is already said
        loop = find_meaning_loop(record, self._cfg)
        if loop is None or loop_was_asked(loop, record.params.get("asked_repetition")):
            return
        self._found[record.seq] = Revision(add={Verdict.REASONING_LOOP},
                                           findings={"loop": loop.model_dump(mode="json")})

    def revisions(self) -> dict[int, Revision]:
        return dict(self._found)

    def summary(self) -> None:
        return None
