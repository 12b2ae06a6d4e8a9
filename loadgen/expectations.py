"""What a correct reply to one request must contain: the facts only that request carries.

A workload that knows the answer gives each request facts of its own (an account id,
the plan it asks for, a contract number in its document) and says which of them a
correct reply states: the arguments of the call the request asks for, or the facts an
answer in prose must name. The record keeps this (`expected`, a public key of
records.jsonl), so the judge can tell a reply that answers its own request from one
that answers another's (`cross_talk`) or none (`wrong_answer`).

Facts that name their request (`distinctive`) are *codes*: 6 to 12 characters of
upper-case letters and digits with at least one of each (`XEHM4B`, `NW481302`). No
natural text produces another request's code by chance, so a code of another request
found anywhere in a reply is evidence that the reply read that request's context.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_CODE_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])[A-Z0-9]{6,12}(?![A-Za-z0-9])")


def is_code(text: str) -> bool:
    """6-12 upper-case letters and digits, at least one of each."""
    return (6 <= len(text) <= 12 and text.isascii() and text.isalnum() and text.isupper()
            and any(c.isdigit() for c in text))


# Capitals and digits as "X", everything else as ".": where a code may be, found at C speed.
_AS_CODE_CHARS = bytes(0x58 if chr(b).isupper() or chr(b).isdigit() else 0x2E
                       for b in range(128)) + b"." * 128


def find_codes(text: str) -> set[str]:
    """Every code in a text (whole tokens only: `XEHM4B`, not `XEHM4BX` or `aXEHM4B`)."""
    if not text:
        return set()
    if not text.isascii():
        return {m for m in _CODE_CANDIDATE.findall(text) if is_code(m)}
    raw = text.encode("ascii")
    mapped = raw.translate(_AS_CODE_CHARS)
    n = len(mapped)
    found: set[str] = set()
    start = mapped.find(b"XXXXXX")
    while start >= 0:  # a run of six or more capitals and digits, from its first
        end = start + 6
        while end < n and mapped[end] == 0x58:
            end += 1
        if end - start <= 12 and (start == 0 or not raw[start - 1:start].isalnum()) \
                and (end == n or not raw[end:end + 1].isalnum()):
            code = text[start:end]
            if is_code(code):
                found.add(code)
        start = mapped.find(b"XXXXXX", end)
    return found


def is_distinctive(text: str) -> bool:
    """A value that names one request: a code, or a value of at least six characters
    the workload made unique in its run (a number of six digits or more, an identifier of
    another alphabet, a made-up name). The workload vouches for the uniqueness; what a
    reply cannot write by chance is the length."""
    return is_code(text) or len(text.strip()) >= 6


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """The tool call a request asks for.

    `arguments` maps an argument key to the fact its value must equal; the check applies
    to every call of the reply that passes that key (the account acted on must be this
    request's in any call). `steps` are other functions a correct reply may call before
    the asked one (a lookup): such a call alone is not a wrong answer. `exact`, where the
    request determines every argument (nested objects, lists, dates), is the whole
    argument object every call of `name` must have, compared by type
    (`judge.reply.known_answers`).
    """

    name: str
    arguments: dict[str, str] = field(default_factory=dict)
    steps: tuple[str, ...] = ()
    exact: dict[str, Any] | None = None


#: The kinds of a known answer (`judge.text.typed_values`).
ANSWER_KINDS = ("text", "number", "date")


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """A known answer the reply's content must give: one fact's value, of a kind.

    `mentions` are the request's other facts a correct reply may state beside the answer
    (the operands of a sum, the date counted from, the row asked about): a value of the
    same kind that is none of them, nor the answer, conflicts with it.
    """

    fact: str
    kind: str = "text"
    mentions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Expectation:
    """A request's own facts and what a correct reply does with them."""

    facts: dict[str, str]
    distinctive: tuple[str, ...] = ()  # fact names whose values name this request
    call: ExpectedCall | None = None  # a tool turn: the call it asks for
    answer: tuple[str, ...] = ()  # an answer in prose: fact names it must state
    #: Known answers checked exactly, by kind (`judge.reply.known_answers`).
    checks: tuple[AnswerCheck, ...] = ()
    #: Facts that were the answers of earlier turns of the same conversation: a reply
    #: that gives one of them instead of this turn's answer answered an earlier ask.
    stale: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in (*self.distinctive, *self.answer, *self.stale,
                     *(self.call.arguments.values() if self.call else ()),
                     *(n for c in self.checks for n in (c.fact, *c.mentions))):
            if name not in self.facts:
                raise ValueError(f"expectation names an unknown fact {name!r}")
        for name in self.distinctive:
            if not is_distinctive(self.facts[name]):
                raise ValueError(f"distinctive fact {name!r} is too short to name a "
                                 f"request: {self.facts[name]!r}")
        for check in self.checks:
            if check.kind not in ANSWER_KINDS:
                raise ValueError(f"answer check of {check.fact!r}: kind must be one of "
                                 f"{', '.join(ANSWER_KINDS)}, not {check.kind!r}")

    @property
    def checkable(self) -> bool:
        """The reply has an answer this expectation checks exactly: a call's arguments,
        facts an answer must state, or known answers."""
        return self.call is not None or bool(self.answer) or bool(self.checks)

    def distinctive_values(self) -> Iterator[str]:
        for name in self.distinctive:
            yield self.facts[name]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"facts": dict(self.facts),
                               "distinctive": list(self.distinctive)}
        if self.call is not None:
            out["call"] = {"name": self.call.name, "arguments": dict(self.call.arguments),
                           "steps": list(self.call.steps)}
            if self.call.exact is not None:
                out["call"]["exact"] = self.call.exact
        if self.answer:
            out["answer"] = list(self.answer)
        if self.checks:
            out["checks"] = [{"fact": c.fact, "kind": c.kind, "mentions": list(c.mentions)}
                             for c in self.checks]
        if self.stale:
            out["stale"] = list(self.stale)
        return out

    @classmethod
    def read(cls, data: Any) -> Expectation | None:
        """`from_dict` of a record's `expected`, parsed once for the same object: the
        counting pass over records.jsonl shows each record to several readers (its
        checked answers, the run-level rules), and each asks for its expectation. The
        last object read is held (its identity cannot pass to another while held) with
        what it read; the readers never change an `expected` they are shown."""
        if data is _last_read[0] and data is not None:
            return _last_read[1]
        exp = cls.from_dict(data)
        _last_read[:] = [data, exp]
        return exp

    @classmethod
    def from_dict(cls, data: Any) -> Expectation | None:
        """The expectation a record carries, or None (none, or not one we can read)."""
        if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
            return None
        call = data.get("call")
        try:
            exact = call.get("exact") if isinstance(call, dict) else None
            return cls(
                facts={str(k): str(v) for k, v in data["facts"].items()},
                distinctive=tuple(str(n) for n in data.get("distinctive") or ()),
                call=ExpectedCall(str(call["name"]),
                                  {str(k): str(v) for k, v in
                                   (call.get("arguments") or {}).items()},
                                  tuple(str(s) for s in call.get("steps") or ()),
                                  exact if isinstance(exact, dict) else None)
                if isinstance(call, dict) and call.get("name") else None,
                answer=tuple(str(n) for n in data.get("answer") or ()),
                checks=tuple(AnswerCheck(str(c["fact"]), str(c.get("kind") or "text"),
                                         tuple(str(m) for m in c.get("mentions") or ()))
                             for c in data.get("checks") or ()),
                stale=tuple(str(n) for n in data.get("stale") or ()),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


#: The object `Expectation.read` read last, and what it read (one entry: the records of a
#: pass come one after the other).
_last_read: list[Any] = [None, None]
