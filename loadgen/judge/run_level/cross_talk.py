"""`cross_talk`: a reply that carries facts belonging to another request of the run.

Every request of a workload that knows its answers carries codes only it has (its
account id, its document's contract number: `loadgen.expectations`). No model makes up
another request's random code, so a reply (reasoning, content or tool-call arguments)
that carries one read that request's context (its KV, through a misplaced metadata row
or a stale block id) or got that request's reply. A code counts however it is written:
in another case, with separators between its characters, with look-alike letters of
another script, or a long enough part of it (`judge.text.code_forms`). The codes are those of
every request the run sent, in any phase, in flight with the reply or long finished (a
stale slot). The record names the request the facts came from, preferring one that was
in flight at the same time, and says whether it was, and what the reply wrote.

Distinctive values that are not codes (identifiers of other alphabets, long numbers, a
session's made-up name: `loadgen.expectations.is_distinctive`) count too, found as they
are written (`run_level.value_index`).

A reply whose wrong fields (`wrong_answer`, `judge.reply.substance`) are all another
request's facts is `cross_talk` only: that is what its wrong answer was.

A random tool-call id that another request's reply carries too is another request's
fact as well (`run_level.tool_ids`, judged as part of this rule).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from loadgen.expectations import Expectation, is_code
from loadgen.judge.reply import substance
from loadgen.judge.reply.family import Family, Finding
from loadgen.judge.reply.substance import WrongFinding
from loadgen.judge.run_level import Revision, completed
from loadgen.judge.run_level.tool_ids import ToolCallIds
from loadgen.judge.run_level.value_index import ValueIndex, normal
from loadgen.judge.text.code_forms import (
    CodeIndex,
    Form,
    fold_code,
    fragments,
    index_of,
)
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict


class CrossTalkSource(Finding):
    """One foreign code in a reply, and the request it belongs to."""

    code: str = ""
    written: str | None = None
    part: bool = False
    where: list[str] = Field(default_factory=list)
    source_item: str | None = None
    source_seq: int = -1
    in_flight_together: bool = False


class CrossTalkFinding(Finding):
    sources: list[CrossTalkSource] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Sent:
    seq: int
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class _Suspect:
    """A completed reply that writes code-like forms its own facts do not explain."""

    seq: int
    item_id: str
    start: float
    end: float
    forms: dict[str, tuple[str, list[str]]]  # folded form -> (as written, where)
    wrong: list[WrongFinding]  # its wrong_answer findings
    #: Other requests' non-code values it writes: normal form -> (as written, where).
    values: dict[str, tuple[str, list[str]]]


#: Bytes of a reply's texts from which they are held compressed.
_PACK_FROM = 512


@dataclass(frozen=True, slots=True)
class _Reply:
    """A completed reply as the scan reads it once every owner is known: its texts, not
    the record. Every completed reply of a run is held until the pass ends, so its texts
    are kept compressed (zlib's fastest level): about half their size for the test
    fixtures' prose in many languages, a third for the generated runs' replies (114 MB
    peak against 130 MB uncompressed on 10,000 replies of 1.8 KB)."""

    seq: int
    item_id: str
    start: float
    end: float
    wheres: tuple[str, ...]  # where each of its non-empty texts is (`_fields`)
    lengths: tuple[int, ...]  # each text's length, in characters
    packed: bytes  # the texts one after the other, UTF-8, compressed if long enough
    facts: tuple[str, ...]  # the values of its own facts (its expectation's)
    findings: dict[str, Any]  # the record's findings, read only if the reply is a suspect

    @classmethod
    def of(cls, seq: int, item_id: str, start: float, end: float,
           fields: list[tuple[str, str]], facts: tuple[str, ...],
           findings: dict[str, Any]) -> _Reply:
        texts = [text for _, text in fields]
        # A lone surrogate (a stream cut inside a pair) is kept as it was written.
        joined = "".join(texts).encode("utf-8", "surrogatepass")
        # Short texts are kept as they are: zlib's set-up costs more than they weigh.
        packed = b"z" + zlib.compress(joined, 1) if len(joined) >= _PACK_FROM else b"=" + joined
        return cls(seq, item_id, start, end, tuple(where for where, _ in fields),
                   tuple(map(len, texts)), packed, facts, findings)

    @property
    def fields(self) -> list[tuple[str, str]]:
        raw = zlib.decompress(self.packed[1:]) if self.packed[:1] == b"z" else self.packed[1:]
        joined = raw.decode("utf-8", "surrogatepass")
        out, at = [], 0
        for where, length in zip(self.wheres, self.lengths, strict=True):
            out.append((where, joined[at:at + length]))
            at += length
        return out


def _window(record: RequestRecord) -> tuple[float, float]:
    """When the request was in flight: a send time or duration that is no number (a
    line that lacks them, or another writer's) reads as 0."""
    sent, end = record.timings.sent, record.timings.end
    start = float(sent) if isinstance(sent, int | float) else 0.0
    return start, start + (float(end) if isinstance(end, int | float) else 0.0)


def _fields(record: RequestRecord) -> list[tuple[str, str]]:
    """Every text of a reply, named as a finding names it."""
    fields = [("reasoning", record.reasoning or ""), ("content", record.content or "")]
    for i, call in enumerate(record.tool_calls or []):
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            fields.append((f"call {i} {fn.get('name') or '?'}", str(fn.get("arguments") or "")))
    return fields


def _forms_in(fields: Iterable[tuple[str, str]], own: set[str],
              find: Callable[[str], Iterable[Form]]) -> dict[str, tuple[str, list[str]]]:
    """The forms `find` sees in a reply's texts (a run's `CodeIndex.scan`: its codes'
    forms) that are not the reply's own codes or parts of them (folded form -> as
    written, where)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for where, text in fields:
        for form in find(text):
            if form.folded in own:
                continue
            places = found.setdefault(form.folded, (text[form.start:form.end], []))[1]
            if where not in places:
                places.append(where)
    return found


class CrossTalk:
    """The rule: who owns each code, and which replies carry someone else's."""

    name = "cross_talk"

    def __init__(self) -> None:
        self._owners: dict[str, set[str]] = {}  # distinctive code -> item ids
        self._value_owners: dict[str, set[str]] = {}  # other distinctive value -> item ids
        self._values = ValueIndex()
        self._facts: dict[str, dict[str, str]] = {}  # item id -> its facts
        self._sent: dict[str, list[_Sent]] = {}  # item id -> its requests
        self._replies: list[_Reply] = []  # completed replies, scanned in `revisions`
        self._ids = ToolCallIds()

    def _own(self, record: RequestRecord) -> Expectation | None:
        item = str(record.item_id or "")
        exp = Expectation.read(record.expected)
        if exp is not None and item not in self._facts:
            self._facts[item] = dict(exp.facts)
            for value in exp.distinctive_values():
                if is_code(value):
                    self._owners.setdefault(value, set()).add(item)
                elif ValueIndex.indexed(value):
                    key = normal(value)
                    if key not in self._value_owners:
                        self._values.add(value)
                    self._value_owners.setdefault(key, set()).add(item)
        return exp

    def observe(self, record: RequestRecord, own: list[str]) -> None:
        """Note who owns which code, and keep a completed reply's texts: a reply may
        carry the code of a request the run has not shown yet, so replies are read in
        `revisions`, once every owner is known (the run's codes indexed once)."""
        item = str(record.item_id or "")
        seq = int(record.seq)
        start, end = _window(record)
        exp = self._own(record)
        self._sent.setdefault(item, []).append(_Sent(seq, start, end))
        self._ids.observe(record, own)
        if not completed(own):
            return
        fields = [(where, text) for where, text in _fields(record) if text]
        if not fields:
            return  # nothing a scan could find
        self._replies.append(_Reply.of(seq, item, start, end, fields,
                                       tuple(exp.facts.values()) if exp is not None else (),
                                       record.findings))

    def _suspects(self, index: CodeIndex) -> list[_Suspect]:
        """The completed replies that write forms of the run's codes or distinctive
        values their own facts do not explain, in the order they were observed."""
        suspects = []
        # The forms a request's own facts explain, worked out once for each set of facts
        # (every request of an item has the same facts; a run sends an item many times).
        explained: dict[tuple[str, ...], set[str]] = {}
        for reply in self._replies:
            given = explained.get(reply.facts)
            if given is None:
                given = explained[reply.facts] = {part for value in reply.facts
                                                  for part in fragments(value)}
            fields = reply.fields
            found = _forms_in(fields, given, index.scan)
            values = self._foreign_values(reply, fields)
            if found or values:
                wrong = substance.FAMILY.read(reply.findings, "wrong_answer")
                suspects.append(_Suspect(reply.seq, reply.item_id, reply.start, reply.end,
                                         found, wrong, values))
        return suspects

    def _foreign_values(self, reply: _Reply, fields: list[tuple[str, str]]
                        ) -> dict[str, tuple[str, list[str]]]:
        """The non-code distinctive values of the run a reply writes that are not its
        own (every owner is known when replies are read)."""
        if not self._values:
            return {}
        own = {normal(v) for v in reply.facts}
        found: dict[str, tuple[str, list[str]]] = {}
        for where, text in fields:
            for hit in self._values.scan(text):
                if hit.key in own:
                    continue
                places = found.setdefault(hit.key, (hit.written, []))[1]
                if where not in places:
                    places.append(where)
        return found

    def _source(self, suspect: _Suspect, item: str) -> tuple[int, bool]:
        """The request of `item` the facts most likely came from, and whether it was in
        flight together with the suspect (else the one sent closest in time)."""
        sent = self._sent.get(item) or []
        together = [s for s in sent if s.start <= suspect.end and suspect.start <= s.end]
        if together:
            return together[0].seq, True
        closest = min(sent, key=lambda s: abs(s.start - suspect.start), default=None)
        return (closest.seq if closest else -1), False

    def revisions(self) -> dict[int, Revision]:
        index = index_of(self._owners)
        out: dict[int, Revision] = self._ids.revisions()
        for suspect in self._suspects(index):
            # The longest written form of each foreign code the reply carries.
            best: dict[str, tuple[str, str, list[str]]] = {}
            for folded, (written, where) in suspect.forms.items():
                for code in index.codes_of(folded):
                    owners = self._owners[code] - {suspect.item_id}
                    if owners and len(folded) > len(best.get(code, ("",))[0]):
                        best[code] = (folded, written, where)
            sources: list[CrossTalkSource] = []
            for code, (folded, written, where) in sorted(best.items()):
                owner = sorted(self._owners[code] - {suspect.item_id})[0]
                seq, together = self._source(suspect, owner)
                sources.append(CrossTalkSource(
                    code=code, written=written, part=folded != fold_code(code),
                    where=sorted(set(where)), source_item=owner, source_seq=seq,
                    in_flight_together=together))
            for key, (written, where) in sorted(suspect.values.items()):
                owners = self._value_owners.get(key, set()) - {suspect.item_id}
                if not owners:
                    continue
                owner = sorted(owners)[0]
                seq, together = self._source(suspect, owner)
                sources.append(CrossTalkSource(
                    code=written, written=written, part=False, where=sorted(set(where)),
                    source_item=owner, source_seq=seq, in_flight_together=together))
            if not sources:
                continue
            finding = CrossTalkFinding(sources=sources)
            revision = Revision(add={Verdict.CROSS_TALK},
                                findings={"cross_talk": finding.model_dump(mode="json")})
            if suspect.wrong and self._explains(suspect.wrong, sources):
                revision.remove.add(Verdict.WRONG_ANSWER)
            out.setdefault(suspect.seq, Revision()).merge(revision)
        return out

    def _explains(self, wrong: list[WrongFinding], sources: list[CrossTalkSource]) -> bool:
        """Every wrong field is the source's: it states a fact of a request whose code the
        reply carries, or it is missing where the reply states that request's own value
        of the same fact instead (a summary of another document)."""
        facts = [self._facts.get(s.source_item or "") or {} for s in sources]
        values = {fold_code(str(v).strip()) for f in facts for v in f.values()}
        values |= {normal(str(v)) for f in facts for v in f.values()}
        carried = {s.code for s in sources} | {normal(s.code) for s in sources}

        def explained(w: WrongFinding) -> bool:
            if w.got is not None:
                got = w.got.strip()
                return fold_code(got) in values or normal(got) in values
            return any(f.get(w.fact) in carried or normal(str(f.get(w.fact))) in carried
                       for f in facts)

        return all(explained(w) for w in wrong)

    def summary(self) -> None:
        return None


def _describe(found: Mapping[str, Any]) -> list[str]:
    lines = []
    for src in found["cross_talk"].sources if found["cross_talk"] is not None else []:
        how = (f" written {src.written!r}" if src.written and src.written != src.code
               else "") + (" (a part of it)" if src.part else "")
        lines.append(f"cross-talk: {src.code}{how} (in {', '.join(src.where)})"
                     f" belongs to seq {src.source_seq} ({src.source_item}), "
                     + ("in flight at the same time" if src.in_flight_together
                        else "not in flight at the same time"))
    return lines


#: `cross_talk` by the run's codes and distinctive values (by tool-call id:
#: `tool_ids.FAMILY`); it explains away the `wrong_answer` it accounts for.
FAMILY = Family(name="cross_talk", verdicts=frozenset({Verdict.CROSS_TALK}),
                findings={"cross_talk": CrossTalkFinding | None}, describe=_describe)
