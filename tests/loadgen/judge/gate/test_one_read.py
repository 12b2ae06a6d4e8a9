"""The counting pass reads records.jsonl once, run-level rules and forensic tails included:
a rule that must know every owner before it judges a reply (cross-talk) judges in its
revisions, and the few revised records whose text a report shows are parsed again from
their own lines, found by where each line lies."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadgen.judge.gate.aggregate import RunStats, aggregate, failure_tail
from loadgen.judge.gate.run_report import rules_for
from loadgen.judge.run_level import own_verdicts
from loadgen.judge.run_level.cross_talk import CrossTalk
from loadgen.records import RequestRecord, iter_record_dicts, iter_record_lines, record_at
from loadgen.results import RECORDS_FILE
from loadgen.scenario import Scenario
from loadgen.taxonomy import Verdict
from tests.loadgen.judge.run_level.test_cross_talk import record
from tests.support.raw_records import FAIL_ON, write_records


def named(seq: int, account: str, customer: str, *, said: str = "") -> dict[str, Any]:
    """A reply whose request also owns a made-up name (a distinctive value, no code)."""
    d = record(seq, account, said=account, sent=1.0)
    d["expected"]["facts"]["customer"] = customer
    d["expected"]["distinctive"].append("customer")
    d["content"] = said
    return d


def run() -> list[dict[str, Any]]:
    """Replies that carry another request's code or name, each before the request that
    owns it (the owner is known only further down the file), after ten other failures
    (so their tails are the extra ones of revised records), and twins that disagree."""
    stuck = [{**record(seq, f"S{seq:03d}X9", said=f"S{seq:03d}X9", sent=1.0),
              "verdicts": ["stuck_in_reasoning"], "findings": {"stuck": "no answer"}}
             for seq in range(10)]
    return [*stuck,
            record(10, "AAAA11", said="BBBB22", sent=20.0, where="reasoning"),
            named(11, "CCCC33", "Thibault Okonkwo", said="for Marguerite Vasquez-Lind"),
            record(12, "BBBB22", said="BBBB22", sent=20.5),
            named(13, "DDDD44", "Marguerite Vasquez-Lind"),
            {**record(14, "EEEE55", said="EEEE55", sent=30.0), "greedy": True,
             "body_hash": "h", "content": "A"},
            {**record(15, "EEEE55", said="EEEE55", sent=30.0), "greedy": True,
             "body_hash": "h", "content": "B"}]


def reads(monkeypatch: pytest.MonkeyPatch, path: Path) -> dict[str, int]:
    """How often records.jsonl is opened, and how many lines are parsed, from now on."""
    count = {"opened": 0, "parsed": 0}
    real_open, real_loads = builtins.open, orjson.loads

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(str(file)) == path:
            count["opened"] += 1
        return real_open(file, *args, **kwargs)

    def counting_loads(data: Any) -> Any:
        count["parsed"] += 1
        return real_loads(data)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(orjson, "loads", counting_loads)
    return count


def judged(out: Path) -> RunStats:
    """The run judged as a report judges it: every run-level rule a run uses."""
    return aggregate(out, FAIL_ON, rules_for(Scenario(name="s")))


def test_records_jsonl_is_opened_and_parsed_once_when_rules_revise_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = run()
    write_records(tmp_path, records)
    count = reads(monkeypatch, tmp_path / RECORDS_FILE)
    stats = judged(tmp_path)
    revised = {c.seq: c for c in stats.changed}
    assert {seq: c.run_level for seq, c in revised.items()} == {
        10: ["cross_talk"], 11: ["cross_talk"], 15: ["divergent"]}
    extra = [t for t in stats.phases["measurement"].failures if t.seq in revised]
    assert [t.seq for t in extra] == [10, 15]  # one example of each run-level verdict
    # Opened once; every line parsed once, and the two tails' lines once more.
    assert count == {"opened": 1, "parsed": len(records) + len(extra)}


def test_the_tails_of_revised_records_are_those_of_their_lines(tmp_path: Path) -> None:
    records = run()
    # Blank, torn and non-object lines move every line after them.
    raw = b"".join(orjson.dumps(d) + b"\n" for d in records[:11])
    raw += b"\n" + b'{"seq": 99, "verdicts": ["ok"]\n' + b"[1, 2]\n"
    raw += b"".join(orjson.dumps(d) + b"\n" for d in records[11:])
    (tmp_path / RECORDS_FILE).write_bytes(raw)
    stats = judged(tmp_path)
    revised = {c.seq: c for c in stats.changed}
    by_seq = {d["seq"]: d for d in records}
    tails = [t for t in stats.phases["measurement"].failures if t.seq in revised]
    assert tails == [failure_tail(RequestRecord.read(by_seq[t.seq]), revised[t.seq].verdicts,
                                  revised[t.seq].findings) for t in tails]
    (cross,) = [t for t in tails if Verdict.CROSS_TALK.value in t.verdicts]
    assert cross.reasoning_tail == "The user wants BBBB22 moved."
    assert cross.why.cross_talk is not None
    assert cross.why.cross_talk.sources[0].source_seq == 12


def test_each_record_is_found_again_where_its_line_lies(tmp_path: Path) -> None:
    path = tmp_path / RECORDS_FILE
    path.write_bytes(b'{"seq": 0}\n\n{"seq": 1\n["no"]\n'  # blank, torn, no object
                     b'{"seq": 2, "content": "\xc3\xa9t\xc3\xa9"}\n'
                     b'{"seq": 3}')  # the last line without its newline
    with open(path, "rb") as fh:
        placed = list(iter_record_lines(fh))
        assert [d for _, _, d in placed] == list(iter_record_dicts(path))
        assert [d["seq"] for _, _, d in placed] == [0, 2, 3]
        assert [record_at(fh, at, size) for at, size, _ in reversed(placed)] == \
            [d for _, _, d in reversed(placed)]


def test_the_rule_alone_finds_what_a_later_request_owns() -> None:
    # Observed once, in file order, with no look ahead: the name's and the code's
    # owners come after the replies that carry them.
    rule = CrossTalk()
    for d in run():
        r = RequestRecord.read(d)
        rule.observe(r, own_verdicts(r))
    revisions = rule.revisions()
    assert {seq for seq, r in revisions.items() if Verdict.CROSS_TALK in r.add} == {10, 11}
    (source,) = revisions[11].findings["cross_talk"]["sources"]
    assert (source["code"], source["source_seq"]) == ("Marguerite Vasquez-Lind", 13)
