"""Sessions turn by turn (`judge.gate.session_view`): what each turn asked, what it
expected, what came back, read from records.jsonl lines as a run (or another writer)
leaves them, each line as the counting pass reads it (`RequestRecord.read`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadgen.expectations import Expectation, ExpectedCall
from loadgen.judge.gate.aggregate import aggregate
from loadgen.judge.gate.session_view import session_views
from loadgen.results.run_level import RunLevelLine
from tests.support.raw_records import write_records

ORDER = Expectation(facts={"order_id": "O1X2Y3"}, distinctive=("order_id",),
                    call=ExpectedCall("get_order", {"order_id": "order_id"})).to_dict()
CALL = {"id": "c1", "type": "function",
        "function": {"name": "get_order", "arguments": '{"order_id": "O1X2Y3"}'}}


def turn(seq: int, session: str, index: int, *, verdicts: list[str] | None = None,
         **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "seq": seq, "phase": "measurement", "item_id": f"session/{session}/{index}",
        "params": {"turn": {"session": session, "index": index, "count": 3, "think_s": 0.0},
                   "tags": {"probe": "session", "turn": "tool-loop", "prefix_tokens": "4096"},
                   "ask": "Where is my order?"},
        "verdicts": verdicts or ["ok"], "content": "", "tool_calls": [CALL],
        "expected": ORDER}
    d.update(extra)
    return d


def test_turns_are_listed_in_order_with_their_final_verdicts(tmp_path: Path) -> None:
    records = [turn(2, "a", 1, verdicts=["wrong_answer"], content="It shipped.",
                    tool_calls=[]),
               turn(0, "a", 0), turn(1, "b", 0), turn(3, "b", 1)]
    changed = [RunLevelLine(seq=3, phase="measurement", verdicts=["cross_talk"],
                            run_level=["cross_talk"])]
    views = session_views(write_records(tmp_path, records), changed)
    assert [(v.session, [t.seq for t in v.turns]) for v in views] == [("a", [0, 2]),
                                                                      ("b", [1, 3])]
    a, b = views
    assert a.prefix_tokens == "4096" and a.turns[0].regime == "tool-loop"
    assert [t.verdicts for t in a.turns] == [["ok"], ["wrong_answer"]]
    assert [t.verdicts for t in b.turns] == [["ok"], ["cross_talk"]]  # run_level.jsonl's
    first, second = a.turns
    assert (first.asked, first.expected) == ("Where is my order?", "get_order(order_id=O1X2Y3)")
    assert first.got == 'get_order({"order_id": "O1X2Y3"})'
    assert second.got == "It shipped."


def test_lines_that_are_no_measured_turn_are_left_out(tmp_path: Path) -> None:
    plain = turn(1, "a", 1)
    plain["params"] = {"ask": "hi"}
    junk_turn = turn(2, "a", 2)
    junk_turn["params"]["turn"] = "not an object"
    views = session_views(write_records(tmp_path, [
        turn(0, "a", 0), plain, junk_turn, turn(3, "a", 3, phase="priming"),
        {**turn(4, "a", 4), "params": "not an object"}]), [])
    assert [[t.seq for t in v.turns] for v in views] == [[0]]


def test_a_line_a_writer_cut_short_is_still_shown(tmp_path: Path) -> None:
    # No seq (-1), no phase (a measured line, as the counting pass counts it), no
    # verdicts (ok), no expectation, calls that are no call: the turn is still shown.
    short = turn(0, "a", 0, tool_calls=["junk", {"function": "x"}, CALL], content="  ")
    for key in ("seq", "phase", "verdicts", "expected"):
        del short[key]
    (view,) = session_views(write_records(tmp_path, [short]), [])
    (shown,) = view.turns
    assert (shown.seq, shown.verdicts, shown.expected) == (-1, ["ok"], "-")
    assert shown.got == 'get_order({"order_id": "O1X2Y3"})'
    nothing = turn(0, "a", 0, tool_calls=None, content=None)
    (view,) = session_views(write_records(tmp_path / "b", [nothing]), [])
    assert view.turns[0].got == "(nothing)"


def test_the_counting_pass_says_which_lines_to_read_again(tmp_path: Path) -> None:
    # The counting pass notes where the session turns lie (`RunStats.turn_lines`): the
    # views read from those lines alone are the views read from the whole file.
    plain = turn(1, "a", 1)
    plain["params"] = {"ask": "hi"}
    junk_turn = turn(2, "a", 2)
    junk_turn["params"]["turn"] = "not an object"
    records = [turn(5, "b", 1, verdicts=["wrong_answer"], content="It shipped.",
                    tool_calls=[]), turn(0, "a", 0), plain, junk_turn,
               turn(3, "a", 3, phase="priming"), turn(4, "b", 0)]
    out = write_records(tmp_path, records)
    stats = aggregate(out, ["wrong_answer"])
    assert stats.turn_lines is not None and len(stats.turn_lines) == 5  # not `plain`
    whole = session_views(out, stats.changed)
    assert session_views(out, stats.changed, lines=stats.turn_lines) == whole
    assert [[t.seq for t in v.turns] for v in whole] == [[4, 5], [0]]
    assert session_views(out, [], lines=[]) == []
