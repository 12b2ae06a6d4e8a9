"""The history's rows are typed: every reader holds a RoundRow, never a column mapping."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from loadgen.commands.history import trend
from loadgen.history import History, RoundRow, Soak
from loadgen.history.changes import FACT_KEYS
from loadgen.history.pooling import GROUP_KEYS, failure_rate, per_group, round_outcome
from loadgen.history.schema import ROUND_COLUMNS, ROUND_FACT_COLUMNS
from loadgen.history.statuses import RoundStatus

FIELDS = {f.name for f in dataclasses.fields(RoundRow)}


def test_every_column_of_the_schema_is_a_field_and_nothing_else_is() -> None:
    """A column the schema gains without a field here would be dropped on read."""
    assert set(ROUND_COLUMNS) == FIELDS - {"verdicts", "verdict_line"}
    assert set(FACT_KEYS) <= FIELDS


def test_an_older_row_reads_as_unknown_never_as_a_guess() -> None:
    """A version-1 row (no facts of what it ran on), NULLs where a default stands, and
    a column this release does not know."""
    row = RoundRow.from_row({"soak_id": "s", "round": 2, "status": "complete",
                             "started": 1.0, "priming": None, "restart_detected": None,
                             "measured": 8, "a_future_column": "x"})
    assert (row.priming, row.restart_detected, row.measured) == (0, 0, 8)
    assert all(getattr(row, name) is None for name, _ in ROUND_FACT_COLUMNS)
    assert "a_future_column" not in row.to_dict()


def _random_row(rng: random.Random, i: int) -> RoundRow:
    status = rng.choice(list(RoundStatus))
    measured = rng.choice([None, 0, 8, 64, 512])
    return RoundRow(
        soak_id=f"soak-{i % 3}", round=i + 1, status=status, started=1000.0 + i,
        exit_code=rng.choice([None, 0, 1, 2, 130]), measured=measured,
        gated_failures=None if measured is None else rng.randint(0, measured),
        vllm_version=rng.choice([None, "0.27.1", "0.27.2"]),
        c128a_layout=rng.choice([None, "packed", "capacity"]),
        host=rng.choice([None, "n1", "n2"]), image=rng.choice([None, "vllm:1"]),
        image_digest=rng.choice([None, "sha256:" + "ab" * 32]))


def test_pooled_groups_add_up_to_their_valid_rounds() -> None:
    """Generated histories: each group's pool is the sum of its complete, valid,
    measured rounds; every other finished round is counted as left out, once."""
    rng = random.Random(3)
    for _ in range(200):
        rows = [_random_row(rng, i) for i in range(rng.randint(0, 12))]
        keys = rng.sample(sorted(GROUP_KEYS), rng.randint(1, 2))
        pools = per_group(rows, keys)
        finished = [r for r in rows if round_outcome(r) != RoundStatus.RUNNING]
        assert sum(p.rounds + p.invalid + p.partial for p in pools) == len(
            [r for r in finished if round_outcome(r) != "complete" or r.measured])
        pooled = [r for r in finished if round_outcome(r) == "complete" and r.measured]
        assert sum(p.measured for p in pools) == sum(r.measured or 0 for r in pooled)
        assert sum(p.failures for p in pools) == sum(r.gated_failures or 0 for r in pooled)
        for p in pools:
            assert p.failure_rate == (p.failures / p.measured if p.measured else None)


def test_history_json_has_every_column_and_its_reading(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    history = History(db)
    history.add_soak(Soak("s1", "nightly", "out", 1.0, "running", None, 2, False), "t")
    history.start_round("s1", 1, started=2.0, scenario="nightly", results_dir="r1",
                        priming=4, restart_detected=True, server_starts={"u": 1.0})
    history.finish_round("s1", 1, status="complete", note=None, ended=3.0,
                         results={"measured": 10, "gated_failures": 1, "exit_code": 1,
                                  "vllm_version": "0.27.1"},
                         verdicts={"measurement": {"stuck_in_reasoning": 1}})
    (row,) = history.all_rounds()
    history.close()
    assert isinstance(row, RoundRow) and row.verdicts == {"stuck_in_reasoning": 1}
    assert failure_rate(row) == pytest.approx(0.1)
    doc = trend([row], ["vllm"]).to_dict({})
    (shown,) = doc["rounds"]
    assert set(shown) == set(ROUND_COLUMNS) | {"verdicts", "outcome", "pooled"}
    assert (shown["outcome"], shown["pooled"]) == ("complete", True)
    (version,) = doc["versions"]
    assert (version["vllm_version"], version["measured"], version["failures"]) == (
        "0.27.1", 10, 1)
    assert set(doc) == {"rounds", "versions", "group_by", "groups", "change_points",
                        "filters"}
