"""What a row read, and whose: the dominant foreign owner behind a row's foreign share."""

from __future__ import annotations

import torch

from server_patch.sim.kv import entry_value
from server_patch.sim.reads import dominant_owner, judge


def values(*owners_and_indices: tuple[int, int]) -> list[int]:
    return [int(entry_value(uid, j)) if uid > 0 else uid for uid, j in owners_and_indices]


def test_the_dominant_owner_wrote_most_of_the_foreign_entries() -> None:
    owners = torch.tensor([[7, 3, 7, 0, 7, 3],   # 7 three times, 3 twice
                           [0, 0, 0, 0, 0, 0],   # nothing foreign
                           [5, 9, 9, 5, 0, 0],   # a tie: the lower uid
                           [4, 0, 0, 0, 0, 0]])
    uid, count = dominant_owner(owners)
    assert uid.tolist() == [7, 0, 5, 4]
    assert count.tolist() == [3, 0, 2, 1]


def test_no_columns_no_owner() -> None:
    uid, count = dominant_owner(torch.zeros((3, 0), dtype=torch.int64))
    assert uid.tolist() == [0, 0, 0] and count.tolist() == [0, 0, 0]


def test_judge_names_whose_kv_a_row_read_and_how_much() -> None:
    # Row 0 (request 1) reads its own entries 0..3. Row 1 (request 2) should read its 4
    # entries and read 3 of request 5's, one of request 6's and one of its own at the
    # wrong column. Row 2 (request 3) reads an unwritten slot and its own entry.
    got = torch.tensor([
        values((1, 0), (1, 1), (1, 2), (1, 3), (0, 0)),
        values((5, 0), (6, 4), (5, 1), (2, 0), (5, 2)),
        values((0, 0), (3, 1), (0, 0), (0, 0), (0, 0)),
    ])
    reads = judge(got, read_len=torch.tensor([4, 5, 2]), owners=torch.tensor([1, 2, 3]),
                  expected=torch.tensor([4, 4, 2]))
    assert reads.foreign.tolist() == [0, 4, 0]
    assert reads.foreign_owner.tolist() == [0, 5, 0]
    assert reads.owner_entries.tolist() == [0, 3, 0]
    assert reads.foreign_share.tolist() == [0.0, 4 / 5, 0.0]
    assert reads.misread.tolist() == [False, True, True]
    assert reads.most_foreign() == 1


def test_entries_past_a_rows_length_are_not_counted() -> None:
    # The row reads 2 columns: request 9's entries beyond them are nobody's read.
    got = torch.tensor([values((9, 0), (4, 1), (9, 1), (9, 2))])
    reads = judge(got, read_len=torch.tensor([2]), owners=torch.tensor([4]),
                  expected=torch.tensor([2]))
    assert reads.foreign_owner.tolist() == [9] and reads.owner_entries.tolist() == [1]
    assert reads.foreign_share.tolist() == [0.5]
