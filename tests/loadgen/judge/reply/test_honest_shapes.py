"""The honest families that repeat themselves (tests/support/honest_shapes.py) get no
gated verdict, and they are varied enough to hold the rules to a shape."""

from __future__ import annotations

import pytest

from loadgen.taxonomy import DEFAULT_FAIL_ON
from tests.support.honest_shapes import FAMILIES, honest_replies
from tests.support.legit_corpus import LegitReply, judged

GATED = {v.value for v in DEFAULT_FAIL_ON}
REPLIES = honest_replies()


@pytest.mark.parametrize("reply", REPLIES, ids=[r.name for r in REPLIES])
def test_an_honest_reply_that_repeats_itself_is_ok(reply: LegitReply) -> None:
    record = judged(reply)
    verdicts = record.verdicts
    assert not GATED.intersection(verdicts), (verdicts, record.findings)
    assert verdicts == ["ok"]


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_varied(family: str) -> None:
    members = FAMILIES[family]()
    assert 15 <= len(members) <= 30
    assert len({m.name for m in members}) == len(members)
    assert len({(m.reasoning, m.content, str(m.tool_calls)) for m in members}) == len(members)
    sizes = {len(m.reasoning) + len(m.content) + len(str(m.tool_calls)) for m in members}
    assert len(sizes) >= len(members) // 2  # different row counts, sizes, songs


def test_the_families_are_the_same_on_every_call() -> None:
    assert [r.name for r in honest_replies()] == [r.name for r in REPLIES]
    assert honest_replies()[7].content == REPLIES[7].content
