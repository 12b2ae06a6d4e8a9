"""The expectation contract: codes, and what a record keeps of a request's facts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.expectations import Expectation, ExpectedCall, find_codes, is_code
from loadgen.taxonomy import (
    DEFAULT_FAIL_ON,
    INFRA_VERDICTS,
    RUN_LEVEL,
    SEVERITY,
    Verdict,
    by_severity,
)


@pytest.mark.parametrize("text,code", [
    ("XEHM4B", True), ("NW481302", True), ("ABCDEF", False), ("123456", False),
    ("XEHM4", False), ("XEHM4BXEHM4BX", False), ("xehm4b", False), ("XEHM-4B", False),
])
def test_a_code_is_6_to_12_capitals_and_digits_with_both(text: str, code: bool) -> None:
    assert is_code(text) is code


def test_codes_are_found_as_whole_tokens_only() -> None:
    text = ("Upgrade XEHM4B (contract NW481302) now; not aXEHM4B, XEHM4BQ9Z1Z1Z, "
            "K7Q2ZD's plan, HTTP2 or 1234567.")
    assert find_codes(text) == {"XEHM4B", "NW481302", "K7Q2ZD"}
    assert find_codes("") == set()


def test_an_expectation_round_trips_through_a_record() -> None:
    exp = Expectation(facts={"account_id": "K7Q2ZD", "plan": "enterprise"},
                      distinctive=("account_id",),
                      call=ExpectedCall("change_plan", {"account_id": "account_id",
                                                        "plan": "plan"}, ("get_account",)))
    assert Expectation.from_dict(exp.to_dict()) == exp
    assert list(exp.distinctive_values()) == ["K7Q2ZD"]
    assert Expectation.from_dict(None) is None
    assert Expectation.from_dict({"facts": "nope"}) is None


def test_an_expectation_refuses_what_it_cannot_check() -> None:
    with pytest.raises(ValueError, match="unknown fact"):
        Expectation(facts={"plan": "pro"}, answer=("account_id",))
    with pytest.raises(ValueError, match="too short to name a request"):
        Expectation(facts={"plan": "pro"}, distinctive=("plan",))


def test_one_order_of_the_verdicts_covers_every_verdict() -> None:
    # The order is the enum's: a verdict declared is a verdict ranked.
    assert tuple(Verdict) == SEVERITY and len(SEVERITY) == len(set(Verdict))
    assert set(Verdict) >= RUN_LEVEL and set(DEFAULT_FAIL_ON) <= set(Verdict)
    # What a one-line summary shows first: a failure of the model before a failure of
    # the path to it, an interrupted request after both, ok last.
    model = [v for v in Verdict if v not in INFRA_VERDICTS
             and v not in (Verdict.INTERRUPTED, Verdict.OK)]
    assert max(map(SEVERITY.index, model)) < min(map(SEVERITY.index, INFRA_VERDICTS))
    assert SEVERITY[-2:] == (Verdict.INTERRUPTED, Verdict.OK)
    assert by_severity([Verdict.OK, Verdict.TIMEOUT, Verdict.TRUNCATED,
                        Verdict.STUCK_IN_REASONING, Verdict.TIMEOUT]) == [
        Verdict.STUCK_IN_REASONING, Verdict.TRUNCATED, Verdict.TIMEOUT, Verdict.OK]
    assert by_severity([Verdict.WRONG_ANSWER, Verdict.CROSS_TALK])[0] is Verdict.CROSS_TALK


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="AB12xy -_.,Zq9\né", max_size=60))
def test_codes_are_found_as_the_whole_token_rule_says_on_any_text(text: str) -> None:
    # The fast scan of ASCII text finds exactly what the rule (a regex) says.
    import re

    rule = re.compile(r"(?<![A-Za-z0-9])[A-Z0-9]{6,12}(?![A-Za-z0-9])")
    assert find_codes(text) == {m for m in rule.findall(text) if is_code(m)}


def test_read_parses_the_same_object_once_and_reads_as_from_dict() -> None:
    # The counting pass shows a record to several readers: its `expected` is parsed once.
    data = Expectation(facts={"order_id": "O1X2Y3"}, distinctive=("order_id",)).to_dict()
    first = Expectation.read(data)
    assert first is not None and first == Expectation.from_dict(data)
    assert Expectation.read(data) is first
    other = dict(data)  # another record's: read anew, the same expectation
    assert Expectation.read(other) is not first and Expectation.read(other) == first
    assert Expectation.read(None) is None and Expectation.read({"facts": 1}) is None
