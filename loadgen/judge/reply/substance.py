"""`wrong_answer`: a reply that does not state its own request's facts.

Where the workload knows the answer (the record's `expected`, `loadgen.expectations`),
a verifiable field is checked against the request's own facts:

- a tool turn: every argument the expectation names (the account acted on, the plan,
  in any call that passes that key) must equal the request's fact; the reply must call
  the function the request asks for, or only the lookups a correct reply may make first
  (`steps`); and it must call nothing else: another offered function beside the right
  one (a cancellation nobody asked for yet) or the asked one twice is a wrong answer.
  A call to a function that was not offered is `bad_tool_call`'s, not counted here;
- a tool turn answered with calls, anywhere in the reply (reasoning, content, the
  calls): a code of its own code's length that none of its facts explains (an account
  nobody gave it);
- an answer in prose that finished (`stop`): it must state each fact the expectation
  names (a code in any of its written forms: another case, separators, look-alike
  letters, `judge.text.code_forms`; a cut answer may not have got there yet and is not held
  to it).

A wrong value that belongs to *another* request of the run is the stronger finding,
`cross_talk`: the run-level rule (`judge.run_level.cross_talk`) replaces this verdict
with that one when every wrong field is another request's fact. What this rule alone
cannot see: a fluent reply that states the right facts and gets the rest wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import orjson

from loadgen import fields
from loadgen.expectations import Expectation, find_codes, is_code
from loadgen.judge.reply.family import Family, Finding, Found
from loadgen.judge.reply.known_answers import answer_problems, argument_problems
from loadgen.judge.text.code_forms import states
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict


class WrongFinding(Finding):
    """A verifiable field that disagrees with the request's own facts."""

    field: str = ""  # where: "call 0 change_plan.account_id", "calls", "content"
    fact: str = ""  # the fact it should state
    expected: str = ""
    got: str | None = None  # None: the reply does not state it at all
    #: The earlier turn's fact the reply gave instead (`stale_answer`), if that is what
    #: it did.
    stale_of: str | None = None


def _norm(value: Any) -> str:
    return str(value).strip().casefold()


def _states(text: str, value: str) -> bool:
    """`value` appears in `text` as a whole token (a code inside a longer code does not):
    a code in any of its written forms, other facts case-insensitively."""
    if is_code(value):
        return states(text, value)
    return re.search(rf"(?<![0-9A-Za-z]){re.escape(value)}(?![0-9A-Za-z])", text,
                     re.IGNORECASE) is not None


def _arguments(call: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    fn = fields.section(call, "function")
    raw = fn.get("arguments") or ""
    try:
        args = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError:
        args = None
    return str(fn.get("name") or ""), args if isinstance(args, dict) else None


def _call_problems(exp: Expectation, record: RequestRecord) -> list[WrongFinding]:
    assert exp.call is not None
    wrong: list[WrongFinding] = []
    names: list[str] = []
    for i, call in enumerate(record.tool_calls):
        name, args = _arguments(call)
        names.append(name)
        if exp.call.exact is not None and name == exp.call.name:
            # Every argument is known: compared whole, by type (the mapping below is
            # part of it).
            if args is not None:
                wrong += [WrongFinding(field=f"call {i} {name}.{p.path}", fact=p.path,
                                       expected=p.expected or "(none)", got=p.got)
                          for p in argument_problems(exp.call.exact, args)]
            continue
        for key, fact in exp.call.arguments.items():
            if args is None or key not in args:
                continue  # unparsable or missing: bad_tool_call's finding
            expected = exp.facts[fact]
            if _norm(args[key]) != _norm(expected):
                got = args[key] if isinstance(args[key], str) else orjson.dumps(args[key])
                wrong.append(WrongFinding(
                    field=f"call {i} {name or '?'}.{key}", fact=fact, expected=expected,
                    got=got if isinstance(got, str) else got.decode()))
    offered = record.params.get("tools")
    considered = [n for n in names if n and (not isinstance(offered, dict) or n in offered)]
    asked, steps = exp.call.name, set(exp.call.steps)
    others = sorted({n for n in considered if n != asked and n not in steps})
    if others:  # instead of the asked call, or beside it: an action nobody asked for
        wrong.append(WrongFinding(field="calls", fact="function", expected=asked,
                                   got=", ".join(others)))
    elif considered.count(asked) > 1:  # the asked action, done more than once
        wrong.append(WrongFinding(field="calls", fact="function", expected=f"{asked} once",
                                   got=f"{asked} x{considered.count(asked)}"))
    return wrong


def _answer_problems(exp: Expectation, record: RequestRecord) -> list[WrongFinding]:
    if record.finish_reason != "stop" or record.tool_calls:
        return []
    content = record.content
    return [WrongFinding(field="content", fact=fact, expected=exp.facts[fact], got=None)
            for fact in exp.answer if not _states(content, exp.facts[fact])]


def _known_answers(exp: Expectation, record: RequestRecord) -> list[WrongFinding]:
    """Known answers (`judge.reply.known_answers`) of a reply that finished (`stop`): a cut
    one is `truncated` or stuck, not held to an answer it had not reached."""
    if record.finish_reason != "stop":
        return []
    return [WrongFinding(field="content", fact=p.fact, expected=p.expected, got=p.got,
                         stale_of=p.stale_of)
            for p in answer_problems(exp, record.content)]


def _mixed(code: str) -> bool:
    """Letters and digits in turn more than once (`K7Q2ZD`), as a made-up code is: a
    name followed by a number (`SHA256`, `RFC822`, `AES128`) is a standard's or an
    algorithm's name, which an honest reply may write."""
    return sum(a.isdigit() != b.isdigit() for a, b in pairwise(code)) >= 2


def _strangers(exp: Expectation, record: RequestRecord,
               found: list[WrongFinding]) -> list[WrongFinding]:
    """Codes of a tool turn's own code length that no fact of its request explains, in
    the reasoning, the content or a call: an account nobody gave this request. A tool
    turn's conversation carries its own codes only, so a code of another request of
    this run is `cross_talk` (the run-level rule reads this finding), and a code of no
    request of the run (another tenant's, an earlier run's, or made up) is a wrong
    answer all the same: the reply speaks of an account the user never named. A call
    already found wrong (`found`) or whose arguments are no object is judged once, by
    what was found of it."""
    own = [(name, exp.facts[name]) for name in exp.distinctive if is_code(exp.facts[name])]
    if not own:
        return []
    known = {value for value in exp.facts.values() if isinstance(value, str)}
    lengths = {len(value) for _, value in own}
    places = [("reasoning", record.reasoning), ("content", record.content)]
    judged = {w.field.split(" ")[1] for w in found if w.field.startswith("call ")}
    for i, call in enumerate(record.tool_calls):
        name, args = _arguments(call)
        if args is None or str(i) in judged:
            continue
        places.append((f"call {i} {name or '?'}",
                       str(fields.section(call, "function").get("arguments") or "")))
    fact, expected = own[0]
    wrong: list[WrongFinding] = []
    for where, text in places:
        stray = sorted(code for code in find_codes(text)
                       if code not in known and len(code) in lengths
                       and _mixed(code))
        if stray:
            wrong.append(WrongFinding(field=where, fact=fact, expected=expected, got=stray[0]))
    return wrong


def find_wrong(record: RequestRecord) -> list[WrongFinding]:
    """The verifiable fields of a completed reply that disagree with its own facts."""
    exp = Expectation.from_dict(record.expected)
    if exp is None:
        return []
    if exp.call is not None and record.tool_calls:
        wrong = _call_problems(exp, record)
        return wrong + _strangers(exp, record, wrong)
    wrong = _answer_problems(exp, record) if exp.answer else []
    if exp.checks:
        wrong += _known_answers(exp, record)
    return wrong


def _check(record: RequestRecord, cfg: object) -> Found | None:
    found = find_wrong(record)
    if not found:
        return None
    verdicts: set[Verdict] = set()
    findings: dict[str, Any] = {}
    wrong = [w for w in found if w.stale_of is None]
    stale = [w for w in found if w.stale_of is not None]
    if wrong:
        verdicts.add(Verdict.WRONG_ANSWER)
        findings["wrong_answer"] = [w.model_dump(mode="json") for w in wrong]
    if stale:
        verdicts.add(Verdict.STALE_ANSWER)
        findings["stale_answer"] = [w.model_dump(mode="json") for w in stale]
    return Found(frozenset(verdicts), findings)


def _describe(found: Mapping[str, Any]) -> list[str]:
    lines = []
    for wrong in found["wrong_answer"]:
        got = "nothing" if wrong.got is None else repr(wrong.got)
        lines.append(f"wrong answer: {wrong.field} states {got}, the request's "
                     f"{wrong.fact} is {wrong.expected!r}")
    for stale in found["stale_answer"]:
        lines.append(f"stale answer: {stale.field} states {stale.got!r}, the answer of an "
                     f"earlier turn ({stale.stale_of}); this turn's {stale.fact} is "
                     f"{stale.expected!r}")
    return lines


#: `wrong_answer` and, where the value given is an earlier turn's, `stale_answer`.
FAMILY = Family(
    name="substance", verdicts=frozenset({Verdict.WRONG_ANSWER, Verdict.STALE_ANSWER}),
    findings={"wrong_answer": list[WrongFinding], "stale_answer": list[WrongFinding]},
    describe=_describe, check=_check)
