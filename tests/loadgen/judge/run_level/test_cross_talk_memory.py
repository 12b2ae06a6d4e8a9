"""The cross-talk rule holds every completed reply's texts until the pass ends (a reply
may carry the code of a request the file shows later): compressed, given back as
written."""

from __future__ import annotations

import random

import pytest

from loadgen.judge.run_level.cross_talk import _Reply
from tests.support.broken_text import honest_passages


@pytest.mark.parametrize("seed", range(20))
def test_a_replys_texts_come_back_as_written(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["a", "Z", "7", " ", "\n", "\x00", "é", "ж", "中", "🙂", "\ud83d", "\u200b"]
    fields = [(where, "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 600))))
              for where in ("reasoning", "content", "call 0 change_plan")]
    fields = [(where, text) for where, text in fields if text]
    reply = _Reply.of(1, "item", 0.0, 1.0, fields, (), {})
    assert reply.fields == fields


def test_prose_is_held_in_a_fraction_of_its_size() -> None:
    passages = [p for texts in honest_passages().values() for p in texts]
    rng = random.Random(0)
    held = written = 0
    for _ in range(200):
        fields = [("reasoning", " ".join(rng.sample(passages, 4))),
                  ("content", rng.choice(passages))]
        packed = _Reply.of(1, "item", 0.0, 1.0, fields, (), {}).packed
        held += len(packed)
        written += sum(len(text.encode()) for _, text in fields)
    assert held < 0.6 * written, (held, written)  # 0.52 measured
