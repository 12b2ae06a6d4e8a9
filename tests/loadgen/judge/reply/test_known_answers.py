"""Known answers are checked exactly: any corruption of the value fails, free wording passes.

Generated families, not examples: values of every kind (identifiers of several alphabets,
numbers, dates), every character position, every kind of edit (substitution, deletion,
transposition, duplication), honest wordings around the right value, and the same
wordings around a wrong one.
"""

from __future__ import annotations

import datetime as dt
import random
import string

import pytest

from loadgen.expectations import AnswerCheck, Expectation, ExpectedCall
from loadgen.judge.reply.known_answers import answer_problems, argument_problems
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

ALPHABETS = {
    "latin": string.ascii_letters + string.digits + "-_",
    "hex": "0123456789abcdef",
    "greek": "αβγδεζηθικλμνξοπρστυφχψω" + string.digits,
    "cyrillic": "абвгдежзийклмнопрстуфхцчшщ" + string.digits,
    "han": "東京大阪名古屋札幌福岡神戸横浜" + string.digits,
    "base32": string.ascii_uppercase + "234567",
}


def identifier(rng: random.Random, alphabet: str, length: int) -> str:
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(length))
        if value[0].isalnum() and value[-1].isalnum():
            return value


def text_values() -> list[str]:
    rng = random.Random("known-answer-values")
    return [identifier(rng, alphabet, length) for alphabet in ALPHABETS.values()
            for length in (6, 9, 14)]


def same_class_other(rng: random.Random, char: str, alphabet: str) -> str:
    pool = [c for c in alphabet if c != char and c.isdigit() == char.isdigit()] or \
        [c for c in alphabet if c != char]
    return rng.choice(pool)


def edits(value: str, alphabet: str) -> list[tuple[str, str]]:
    """Every single edit of `value`: (kind at position, edited value)."""
    rng = random.Random(value)
    out = []
    for i, char in enumerate(value):
        out.append((f"substitute@{i}", value[:i] + same_class_other(rng, char, alphabet)
                    + value[i + 1:]))
        out.append((f"delete@{i}", value[:i] + value[i + 1:]))
        out.append((f"duplicate@{i}", value[:i] + char + value[i:]))
        if i + 1 < len(value) and value[i + 1] != char:
            out.append((f"transpose@{i}", value[:i] + value[i + 1] + char + value[i + 2:]))
    return [(k, v) for k, v in out if v != value]


HONEST = (
    "{v}",
    "The identifier is {v}.",
    "Sure! Here it is: `{v}`",
    "**{v}**\n\nLet me know if you need anything else.",
    "You asked me to repeat it exactly, so: \"{v}\".",
    "Answer: {v}",
    "- {v}\n",
    "Der Wert lautet {v}.",
)


def expectation(value: str, kind: str = "text", **mentions: str) -> Expectation:
    return Expectation(facts={"answer": value, **mentions},
                       checks=(AnswerCheck("answer", kind, tuple(mentions)),))


def record(content: str, exp: Expectation, finish: str = "stop") -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", finish_reason=finish,
                         reasoning="", content=content, expected=exp.to_dict())


@pytest.mark.parametrize("value", text_values())
def test_every_single_edit_of_an_identifier_fails_in_every_wording(value: str) -> None:
    alphabet = next(a for a in ALPHABETS.values() if set(value) <= set(a))
    exp = expectation(value)
    for template in HONEST:
        assert answer_problems(exp, template.format(v=value)) == [], template
    for kind, edited in edits(value, alphabet):
        for template in HONEST:
            problems = answer_problems(exp, template.format(v=edited))
            assert problems and problems[0].fact == "answer", (kind, edited, template)


@pytest.mark.parametrize("value", text_values()[::3])
def test_an_altered_copy_beside_the_right_value_fails(value: str) -> None:
    alphabet = next(a for a in ALPHABETS.values() if set(value) <= set(a))
    exp = expectation(value)
    for kind, edited in edits(value, alphabet)[::5]:
        content = f"The value is {value}; in the log it appears as {edited}."
        (problem,) = answer_problems(exp, content)
        assert problem.got == edited, kind


def numbers_family() -> list[int]:
    rng = random.Random("numbers")
    return [rng.randrange(10 ** (n - 1), 10 ** n) for n in (5, 6, 7, 9) for _ in range(3)]


def written_forms(n: int) -> list[str]:
    grouped = f"{n:,}"
    return [str(n), grouped, grouped.replace(",", " "), grouped.replace(",", "\u202f"),
            grouped.replace(",", "."), f"{n}.00", f"${grouped}", f"{grouped} EUR",
            grouped.replace(",", "'")]


@pytest.mark.parametrize("n", numbers_family())
def test_a_number_passes_in_every_written_form_and_fails_off_by_any_digit(n: int) -> None:
    exp = expectation(str(n), "number", a="1200", b=str(n - 1200))
    for form in written_forms(n):
        for template in ("The total is {v}.", "{v}", "1200 + {b} = {v}",
                         "After adding everything up I get {v} in all."):
            text = template.format(v=form, b=n - 1200)
            assert answer_problems(exp, text) == [], text
    digits = str(n)
    for i in range(len(digits)):
        for delta in (1, -1):
            d = (int(digits[i]) + delta) % 10
            wrong = digits[:i] + str(d) + digits[i + 1:]
            if wrong[0] == "0" or wrong == digits:
                continue
            for form in written_forms(int(wrong))[:4]:
                text = f"Adding them gives {form}, as requested."
                assert answer_problems(exp, text), text
    # The right total beside a wrong one of its size: a conflict.
    assert answer_problems(exp, f"The total is {n} (earlier I said {n + 10}).")


def test_a_year_or_a_count_beside_the_right_number_is_no_conflict() -> None:
    exp = expectation("4823190", "number")
    assert answer_problems(exp, "In 2026 the 3 invoices add up to 4,823,190.") == []
    assert answer_problems(exp, "Total (as of 2026-04-28): 4823190") == []


def dates_family() -> list[dt.date]:
    rng = random.Random("dates")
    start = dt.date(2024, 1, 1)
    return [start + dt.timedelta(days=rng.randrange(2000)) for _ in range(8)]


def date_forms(day: dt.date) -> list[str]:
    return [day.isoformat(), day.strftime("%B %d, %Y"), f"{day.day} {day:%B %Y}",
            day.strftime("%d.%m.%Y"), day.strftime("%m/%d/%Y"), day.strftime("%a, %b %d %Y"),
            f"{day:%B} {day.day}th, {day.year}"]


@pytest.mark.parametrize("day", dates_family())
def test_a_date_passes_in_every_format_and_fails_a_day_off(day: dt.date) -> None:
    base = day - dt.timedelta(days=45)
    exp = expectation(day.isoformat(), "date", base=base.isoformat())
    for form in date_forms(day):
        text = f"45 days after {base.isoformat()} is {form}."
        assert answer_problems(exp, text) == [], text
    for delta in (1, -1, 30, 365):
        wrong = day + dt.timedelta(days=delta)
        for form in date_forms(wrong):
            assert answer_problems(exp, f"That is {form}."), form


def test_a_stale_answer_is_told_from_a_wrong_one() -> None:
    exp = Expectation(facts={"budget": "482913", "order": "QK7T2ZP4"},
                      checks=(AnswerCheck("budget", "number"),), stale=("order",))
    assert answer_problems(exp, "Your budget is 482,913 for order QK7T2ZP4.") == []
    exp = Expectation(facts={"budget": "482913", "order": "719204"},
                      checks=(AnswerCheck("budget", "number"),), stale=("order",))
    (stale,) = answer_problems(exp, "That is 719,204.")
    assert stale.stale_of == "order"
    rec = record("That is 719,204.", exp)
    assert classify(rec, VerdictConfig())[0] == "stale_answer"
    rec = record("That is 719,205.", exp)
    assert "wrong_answer" in classify(rec, VerdictConfig())


def test_a_cut_or_stuck_reply_is_not_held_to_its_answer_but_an_empty_one_is() -> None:
    exp = expectation("QK7T2ZP4")
    assert classify(record("The code is", exp, finish="length"),
                    VerdictConfig()) == ["truncated"]
    verdicts = classify(record("", exp), VerdictConfig())
    assert "wrong_answer" in verdicts and "empty_content" in verdicts


SHIPMENT = {"order_id": "ORD-7F3K2Q", "deliver_by": "2026-05-14",
            "items": [{"sku": "SKU-4471", "quantity": 3}, {"sku": "SKU-0912", "quantity": 1}],
            "address": {"street": "12 Harbour Lane", "city": "Bergen"},
            "express": True}


def mutations(value: object, path: str = "") -> list[tuple[str, object]]:
    """Every way to change one leaf of an argument object (and to drop or add a key)."""
    out: list[tuple[str, object]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            for where, changed in mutations(inner, f"{path}.{key}"):
                out.append((where, {**value, key: changed}))
            out.append((f"{path}.{key} dropped", {k: v for k, v in value.items() if k != key}))
        out.append((f"{path} extra key", {**value, "note": "as requested"}))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            for where, changed in mutations(inner, f"{path}[{i}]"):
                out.append((where, [*value[:i], changed, *value[i + 1:]]))
        out.append((f"{path} item dropped", value[1:]))
        out.append((f"{path} item doubled", [*value, value[0]]))
    elif isinstance(value, bool):
        out.append((path, not value))
    elif isinstance(value, int):
        out += [(path, value + 1), (path, value - 1)]
    elif isinstance(value, str):
        alphabet = string.ascii_uppercase + string.digits
        out += [(f"{path} {kind}", edited) for kind, edited in
                edits(value, alphabet)[::4]]
    return out


def test_a_computed_call_passes_written_any_honest_way_and_fails_any_mutation() -> None:
    honest = [
        SHIPMENT,
        {**SHIPMENT, "items": list(reversed(SHIPMENT["items"]))},  # a multiset
        {**SHIPMENT, "deliver_by": "2026-05-14T00:00:00Z"},
        {**SHIPMENT, "items": [{"sku": "SKU-4471", "quantity": "3"},
                               {"quantity": 1.0, "sku": "SKU-0912"}]},
        {**SHIPMENT, "address": {"city": "bergen", "street": "12 Harbour Lane "}},
    ]
    for args in honest:
        assert argument_problems(SHIPMENT, args) == [], args
    for where, args in mutations(SHIPMENT):
        assert argument_problems(SHIPMENT, args), where


def test_a_computed_call_is_a_wrong_answer_through_the_verdicts() -> None:
    import orjson

    exp = Expectation(facts={"order_id": "ORD-7F3K2Q"}, distinctive=("order_id",),
                      call=ExpectedCall("create_shipment", exact=SHIPMENT))
    bad = {**SHIPMENT, "items": [{"sku": "SKU-4471", "quantity": 3}]}
    rec = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                        endpoint="http://x", item_id="i", finish_reason="tool_calls",
                        tool_calls=[{"id": "c", "type": "function", "function": {
                            "name": "create_shipment", "arguments": orjson.dumps(bad).decode()}}],
                        params={"tools": {"create_shipment": list(SHIPMENT)},
                                "expects_tool_call": True}, expected=exp.to_dict())
    assert classify(rec, VerdictConfig()) == ["wrong_answer"]
    assert rec.findings["wrong_answer"][0]["field"] == "call 0 create_shipment.items[]"


def test_expectations_with_checks_travel_through_records() -> None:
    exp = Expectation(facts={"answer": "482913", "a": "1"},
                      checks=(AnswerCheck("answer", "number", ("a",)),), stale=("a",),
                      call=ExpectedCall("f", exact={"x": [1, {"y": "2026-01-01"}]}))
    assert Expectation.from_dict(exp.to_dict()) == exp
    assert exp.checkable and not Expectation(facts={}).checkable
    with pytest.raises(ValueError):
        Expectation(facts={"a": "1"}, checks=(AnswerCheck("a", "colour"),))
