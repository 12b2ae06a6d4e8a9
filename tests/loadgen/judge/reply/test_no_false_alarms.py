"""Legitimate replies never get a gated verdict (the corpus: tests/support/legit_corpus.py)."""

from __future__ import annotations

import pytest

from loadgen.taxonomy import DEFAULT_FAIL_ON
from tests.support.legit_corpus import CORPUS, LegitReply, grown_corpus, judged

GATED = {v.value for v in DEFAULT_FAIL_ON}


@pytest.mark.parametrize("reply", CORPUS, ids=[r.name for r in CORPUS])
def test_a_legitimate_reply_is_ok(reply: LegitReply) -> None:
    record = judged(reply)
    verdicts = record.verdicts
    assert not GATED.intersection(verdicts), (verdicts, record.findings)
    assert verdicts == ["ok"]


def test_the_corpus_is_long_enough_to_matter() -> None:
    # Every loop rule has something to bite on: long texts, many similar lines.
    assert max(len(r.content) for r in CORPUS) > 3000  # past the 400-word n-gram tail
    assert max(len(r.reasoning.split()) for r in CORPUS) > 400
    assert sum(1 for r in CORPUS if r.tool_calls) >= 4


def test_the_grown_corpus_gets_no_gated_verdict() -> None:
    # Every family of honest replies, generated with varied values: languages and formats
    # that are hard for a salad detector, shapes that repeat themselves, markup talked about.
    flagged = {}
    corpus = grown_corpus(members=20)
    for reply in corpus:
        record = judged(reply)
        verdicts = record.verdicts
        if GATED.intersection(verdicts):
            flagged[reply.name] = (verdicts, record.findings)
    assert flagged == {}
    assert len(corpus) > 500
