"""Known answers, checked exactly: the value a request's reply must give, by its kind.

A workload that knows the answer of a request (an identifier to echo, a value planted in
a long prompt, a catalog row, a sum, a date, a session's own fact) writes it into the
record's expectation (`AnswerCheck`, `ExpectedCall.exact`). The reply passes only if it
gives that value, after only the normalisation the value's kind needs
(`judge.text.typed_values`). No detector of failure shapes is involved: a corruption of any
shape (one character changed, dropped, doubled or swapped, a digit off, another row's
code, another session's name) makes the answer absent, and fails.

Free wording around the right value passes: the value is looked for in whatever the
content says. What a correct reply may not do is state a *second*, conflicting value of
the same kind: a near copy of an identifier (`k3J-9xQ_a` and `k3J-9xQa`), a number of the
answer's size that no fact of the request explains, another date. The request's own
facts named in `mentions` (operands, the date counted from, the item asked about) and
earlier turns' answers are not conflicts.

A reply that gives an earlier turn's answer (`Expectation.stale`) instead of this turn's
answered an earlier ask: that is a finding of its own (`stale_answer`).

Tool calls whose every argument follows from the request (`ExpectedCall.exact`) are
compared by type: objects key by key (a missing or an extra key is wrong), lists as
multisets, numbers by value (a numeric string included), dates by day, words without
case, identifiers exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from loadgen.expectations import AnswerCheck, Expectation
from loadgen.judge.text.typed_values import (
    DATE,
    NUMBER,
    date_value,
    dates,
    kind_of,
    near_misses,
    nfc,
    number_value,
    numbers,
    same_number,
    same_shape,
    states_text,
)


@dataclass(frozen=True, slots=True)
class AnswerProblem:
    """One known answer the reply does not give as it should."""

    fact: str
    expected: str
    got: str | None  # the conflicting value it wrote, or None: the answer is absent
    stale_of: str | None = None  # the earlier turn's fact it gave instead


def _stated(content: str, kind: str, value: str) -> bool:
    if kind == NUMBER:
        target = number_value(value)
        return target is not None and any(same_number(n, target) for n in numbers(content))
    if kind == DATE:
        day = date_value(value)
        return day is not None and any(day in d.readings for d in dates(content))
    return states_text(content, value)


def _conflicts(content: str, check: AnswerCheck, exp: Expectation) -> list[str]:
    """Values of the answer's kind the content writes that no fact explains."""
    value = exp.facts[check.fact]
    known = [exp.facts[n] for n in (check.fact, *check.mentions, *exp.stale)]
    if check.kind == NUMBER:
        target = number_value(value)
        if target is None:
            return []
        size = len(str(abs(int(target))))
        explained = {v for v in map(number_value, known) if v is not None}
        for mention in dates(content):  # a date's year is no number of the answer's
            content = content.replace(mention.written, " ")
        return [n.written for n in numbers(content)
                if not n.readings & explained
                and size >= 4 and abs(n.digits - size) <= 1]
    if check.kind == DATE:
        explained_days = {d for d in map(date_value, known) if d is not None}
        return [d.written for d in dates(content) if not d.readings & explained_days]
    allowed = frozenset(nfc(v) for v in known)
    return list(dict.fromkeys([*near_misses(content, value, allowed),
                               *same_shape(content, value, allowed)]))


def answer_problems(exp: Expectation, content: str) -> list[AnswerProblem]:
    """Each known answer of `exp` that `content` does not give, or gives beside a
    conflicting value of its kind."""
    problems: list[AnswerProblem] = []
    for check in exp.checks:
        value = exp.facts[check.fact]
        if not _stated(content, check.kind, value):
            stale = next((n for n in exp.stale
                          if _stated(content, kind_of(exp.facts[n]), exp.facts[n])), None)
            conflicting = _conflicts(content, check, exp)
            problems.append(AnswerProblem(
                check.fact, value, conflicting[0] if conflicting else
                (exp.facts[stale] if stale else None), stale))
            continue
        for got in _conflicts(content, check, exp)[:1]:
            problems.append(AnswerProblem(check.fact, value, got))
    return problems


# -- tool-call arguments, by type -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    path: str  # "items[]", "address.city", "deliver_by"
    expected: str | None  # None: an argument the call should not have
    got: str | None  # None: the argument is missing


def _dump(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _as_number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if isinstance(value, str):
        return number_value(value.strip())
    return None


def _same_string(expected: str, got: Any) -> bool:
    if not isinstance(got, str):
        return False
    day = date_value(expected)
    if day is not None:
        return any(day in d.readings for d in dates(got)) and len(dates(got)) == 1
    a, b = nfc(expected).strip(), nfc(got).strip()
    if a.replace(" ", "").isalpha():  # a word (a city, an enum value): any case
        return a.casefold() == b.casefold()
    return a == b


def argument_problems(expected: Any, got: Any, path: str = "") -> list[ArgumentProblem]:
    """Where `got` differs from `expected`, compared by type."""
    here = path or "arguments"
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return [ArgumentProblem(here, _dump(expected), _dump(got))]
        out: list[ArgumentProblem] = []
        for key, value in expected.items():
            where = f"{path}.{key}" if path else key
            if key not in got:
                out.append(ArgumentProblem(where, _dump(value), None))
            else:
                out += argument_problems(value, got[key], where)
        for key in got:
            if key not in expected:
                where = f"{path}.{key}" if path else key
                out.append(ArgumentProblem(where, None, _dump(got[key])))
        return out
    if isinstance(expected, list):
        if not isinstance(got, list):
            return [ArgumentProblem(here, _dump(expected), _dump(got))]
        left = list(got)
        missing = []
        for item in expected:  # a multiset: each expected element matches one element
            match = next((i for i, g in enumerate(left) if not argument_problems(item, g)),
                         None)
            if match is None:
                missing.append(item)
            else:
                left.pop(match)
        if missing or left:
            return [ArgumentProblem(f"{here}[]", _dump(missing) if missing else None,
                                    _dump(left) if left else None)]
        return []
    if isinstance(expected, bool) or expected is None:
        return [] if got == expected else [ArgumentProblem(here, _dump(expected), _dump(got))]
    if isinstance(expected, int | float):
        want, have = _as_number(expected), _as_number(got)
        return [] if want is not None and want == have else [
            ArgumentProblem(here, _dump(expected), _dump(got))]
    if isinstance(expected, str):
        return [] if _same_string(expected, got) else [
            ArgumentProblem(here, expected, _dump(got))]
    return [] if got == expected else [ArgumentProblem(here, _dump(expected), _dump(got))]
