"""Which row of the step each running request gets: vLLM's persistent batch order.

The bug is about rows, so the row a request sits in decides what a misplaced read
finds. vLLM keeps requests in a persistent input batch and moves them as little as it
can; the sim places them the same way, each step:

1. finished requests leave holes where they were;
2. new requests fill the lowest holes first, the rest go at the end
   (`InputBatch.add_request` reuses removed indices, lowest first);
3. `InputBatch.condense` moves the last requests into any holes left, lowest first;
4. the attention backend's reorder puts decodes before prefills: the first prefill
   from the front swaps with the last decode from the back, until they meet
   (`reorder_batch_to_split_decodes_and_prefills`).

A request keeps its row until one of these moves it, so old and new requests mix
across the rows rather than sorting by age.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def next_rows(rows: Sequence[T | None], admitted: Sequence[T]) -> list[T]:
    """The step's rows: running requests (None where one finished) and this step's
    admitted requests placed as vLLM places them; decodes first, admitted last."""
    placed = list(rows)
    new = list(admitted)
    for i, row in enumerate(placed):
        if not new:
            break
        if row is None:
            placed[i] = new.pop(0)
    placed.extend(new)
    _condense(placed)
    _decodes_first(placed, {id(r) for r in admitted})
    return [r for r in placed if r is not None]


def _condense(rows: list[T | None]) -> None:
    while rows and rows[-1] is None:
        rows.pop()
    for i in range(len(rows)):
        if i >= len(rows):
            break
        if rows[i] is None:
            rows[i] = rows.pop()
            while rows and rows[-1] is None:
                rows.pop()


def _decodes_first(rows: list[T | None], prefills: set[int]) -> None:
    front, back = 0, len(rows) - 1
    while True:
        while front < len(rows) and id(rows[front]) not in prefills:
            front += 1
        while back >= 0 and id(rows[back]) in prefills:
            back -= 1
        if front >= back:
            return
        rows[front], rows[back] = rows[back], rows[front]
