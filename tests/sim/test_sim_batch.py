"""The rows requests get: vLLM's persistent batch (fill holes, condense, decodes first)."""

from __future__ import annotations

from server_patch.sim.batch import next_rows


def test_new_requests_fill_holes_then_swap_behind_the_decodes() -> None:
    # B and D finished; X and Y fill their holes, then the last decode (E) swaps with
    # the first prefill (X): as vLLM's add_request + reorder leave the batch.
    assert next_rows(["A", None, "C", None, "E"], ["X", "Y"]) == ["A", "E", "C", "Y", "X"]


def test_holes_without_new_requests_are_filled_from_the_end() -> None:
    assert next_rows(["A", None, "C", None, "E", "F"], []) == ["A", "F", "C", "E"]
    assert next_rows(["A", "B", None, None], []) == ["A", "B"]


def test_more_new_requests_than_holes_go_at_the_end() -> None:
    assert next_rows(["A", None, "C"], ["X", "Y", "Z"]) == ["A", "C", "X", "Y", "Z"]


def test_a_request_keeps_its_row_while_nothing_moves_it() -> None:
    rows = ["A", "B", "C", "D"]
    assert next_rows(rows, []) == rows
    assert next_rows(["A", None, "C", "D"], ["X"])[:1] == ["A"]
