"""Sessions turn by turn: what each turn asked, what it expected, what came back.

A session's turns are separate records; a person reading a failed session needs them
in order, with the verdict of each, so a face that starts at one turn (the first cache
hit over a long prefix, a new user turn) shows as such. Read from records.jsonl after
the counting pass, each line as the counting pass reads it (`RequestRecord.read`), a
bounded number of sessions: memory stays small for long soaks. The counting pass notes
where the lines of session turns lie (`RunStats.turn_lines`), so only those are read
again, not the whole file (most runs have no session, and read none).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.expectations import Expectation
from loadgen.judge.run_level import own_verdicts
from loadgen.records import RequestRecord, iter_record_dicts, record_at
from loadgen.results import RECORDS_FILE
from loadgen.results.run_level import RunLevelLine

#: Sessions listed at most (the failed ones first); failed turns detailed at most.
MAX_SESSIONS = 64
MAX_DETAILS = 24
TEXT_CHARS = 160


@dataclass(frozen=True)
class TurnView:
    seq: int
    index: int
    regime: str  # tool-loop or user-turn
    verdicts: list[str]
    asked: str
    expected: str
    got: str

    @property
    def ok(self) -> bool:
        return self.verdicts == ["ok"]


@dataclass
class SessionView:
    session: str
    prefix_tokens: str
    turns: list[TurnView] = field(default_factory=list)

    @property
    def failed(self) -> list[TurnView]:
        return [t for t in self.turns if not t.ok]


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…"


def expected_text(data: object) -> str:
    """What a correct reply gives, in a few words."""
    exp = Expectation.from_dict(data)
    if exp is None:
        return "-"
    if exp.call is not None:
        args = exp.call.exact if exp.call.exact is not None else {
            key: exp.facts[fact] for key, fact in exp.call.arguments.items()}
        return f"{exp.call.name}({', '.join(f'{k}={v}' for k, v in args.items())})"
    named = [exp.facts[c.fact] for c in exp.checks] or [exp.facts[n] for n in exp.answer]
    return ", ".join(named) or "-"


def got_text(record: RequestRecord) -> str:
    calls = record.tool_calls
    parts = []
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            parts.append(f"{fn.get('name')}({fn.get('arguments')})")
    content = record.content
    if isinstance(content, str) and content.strip():
        parts.append(content)
    return _clip(" ".join(parts)) or "(nothing)"


def _lines_at(path: Path, lines: Sequence[tuple[int, int]]) -> Iterator[dict[str, Any]]:
    """The records on the lines at (offset, length), in the order given."""
    if not lines:
        return
    with open(path, "rb") as fh:
        for at, size in lines:
            yield record_at(fh, at, size)


def session_views(out_dir: Path, changed: list[RunLevelLine], phase: str = "measurement",
                  lines: Sequence[tuple[int, int]] | None = None) -> list[SessionView]:
    """The phase's sessions, turn by turn (failed sessions first, then by name).

    `lines`: where the records of session turns lie in records.jsonl (offset, length, in
    file order), as the counting pass found them; None: every line is read."""
    path = out_dir / RECORDS_FILE
    if not path.exists():
        return []
    final = {c.seq: c.verdicts for c in changed}
    sessions: dict[str, SessionView] = {}
    for d in iter_record_dicts(path) if lines is None else _lines_at(path, lines):
        if not isinstance(d.get("params"), dict) or "turn" not in d["params"]:
            continue  # no session's turn (most runs have none): not worth reading whole
        rec = RequestRecord.read(d)
        params = rec.params
        turn = params.get("turn")
        if rec.phase != phase or not isinstance(turn, dict):
            continue
        found = params.get("tags")
        tags: dict[str, object] = found if isinstance(found, dict) else {}
        name = str(turn.get("session"))
        view = sessions.get(name)
        if view is None:
            view = sessions[name] = SessionView(name, str(tags.get("prefix_tokens", "-")))
        seq = int(str(rec.seq))
        view.turns.append(TurnView(
            seq=seq, index=int(str(turn.get("index", 0))), regime=str(tags.get("turn", "-")),
            verdicts=final.get(seq) or own_verdicts(rec),
            asked=_clip(str(params.get("ask") or "")),
            expected=_clip(expected_text(rec.expected)), got=got_text(rec)))
    views = list(sessions.values())
    for view in views:
        view.turns.sort(key=lambda t: t.index)
    views.sort(key=lambda v: (not v.failed, v.session))
    return views[:MAX_SESSIONS]
