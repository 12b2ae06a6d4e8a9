"""Figures in a greedy prose answer are held to the solo reply's under any wording.

Generated: a solo answer states two to four facts (an amount of money, a count of
something, a percent, a date), each in one of many written forms (a currency's sign,
code or name; grouped with commas, spaces or dots; a date in five formats) and in one
of many sentences. The loaded reply of the same body rewords everything: other forms,
other sentences, another order, a fact dropped, a figure of another unit added, its
points numbered. Honest, it passes; with one fact's value replaced, it is a
`reference_mismatch` whatever the wording. Before figures were keyed by unit, only a
figure under the same words on both sides was compared: every replaced figure worded
otherwise passed.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadgen.judge.run_level import own_verdicts
from loadgen.judge.run_level.reference import ReferenceAgreement
from loadgen.judge.text.quantities import contradictions, figures
from loadgen.records import RequestRecord
from loadgen.scenario import ReferenceConfig
from loadgen.taxonomy import Verdict
from tests.loadgen.conftest import run_cli
from tests.support.openai_fake import asked
from tests.support.scenario_files import write_scenario

VARIANTS = 200
SERVED = 12  # measured replies (four bodies, three times each)


def _money(rng: random.Random, value: Decimal, code: str) -> str:
    whole, cents = divmod(value, 1)
    cents_text = f"{int(cents * 100):02d}"
    groups = f"{int(whole):,}"
    sign = {"USD": "$", "EUR": "€", "GBP": "£"}[code]
    name = {"USD": "dollars", "EUR": "euros", "GBP": "pounds"}[code]
    number = rng.choice([f"{groups}.{cents_text}", f"{int(whole)}.{cents_text}",
                         f"{groups}.{cents_text}".rstrip("0").rstrip(".")])
    if code == "EUR" and rng.random() < 0.5:  # written the continental way
        number = rng.choice([groups.replace(",", ".") + "," + cents_text,
                             groups.replace(",", "\u00a0") + "," + cents_text])
    return rng.choice([f"{sign}{number}", f"{sign} {number}", f"{number} {code}",
                       f"{number} {name}"])


def _date(rng: random.Random, day: dt.date) -> str:
    return rng.choice([day.isoformat(), f"{day:%B} {day.day}, {day.year}",
                       f"{day.day} {day:%B} {day.year}", f"{day:%b}. {day.day}, {day.year}",
                       f"{day.day}th of {day:%B} {day.year}"])


_SENTENCES = {
    "money": ["The total is {}.", "You owe {}.", "It comes to {} in all.",
              "Your next invoice, {}, is ready.", "We charged {} to the card on file."],
    "count": ["The account has {}.", "There are {} on the plan.", "You now pay for {}.",
              "{} are active."],
    "percent": ["The discount is {}.", "That is a {} reduction.", "Usage reached {}."],
    "date": ["It renews on {}.", "The next charge is due {}.", "Expect it by {}."],
}
_COUNTED = ["seats", "licences", "users", "devices", "projects"]


def _fact(rng: random.Random, kind: str) -> Any:
    if kind == "money":
        return (Decimal(rng.randint(100, 999_999)) / 100, rng.choice(["USD", "EUR", "GBP"]))
    if kind == "count":
        return (rng.randint(2, 400), rng.choice(_COUNTED))
    if kind == "percent":
        return rng.randint(1, 99)
    return dt.date(2026, 1, 1) + dt.timedelta(days=rng.randint(0, 700))


def _replaced(rng: random.Random, kind: str, value: Any) -> Any:
    if kind == "money":
        step = Decimal(rng.choice([1, 9, 90, -1, 10])) / (100 if rng.random() < 0.5 else 1)
        return (value[0] + step if value[0] > 100 else value[0] + 1, value[1])
    if kind == "count":
        return (value[0] + rng.choice([1, -1, 9]), value[1])
    if kind == "percent":
        return value + rng.choice([1, 10]) if value < 80 else value - 5
    return value + dt.timedelta(days=rng.choice([1, -1, 30, 365]))


def _written(rng: random.Random, kind: str, value: Any) -> str:
    if kind == "money":
        return _money(rng, *value)
    if kind == "count":
        return f"{value[0]} {value[1]}"
    if kind == "percent":
        return rng.choice([f"{value}%", f"{value} %", f"{value} percent"])
    return _date(rng, value)


def _answer(rng: random.Random, facts: dict[str, Any], extra: bool,
            account: str = "Q1RST1") -> str:
    lines = [rng.choice(_SENTENCES[kind]).format(_written(rng, kind, value))
             for kind, value in facts.items()]
    rng.shuffle(lines)
    if extra:  # a figure of another unit, and the points numbered
        lines.append(f"Support replies within {rng.randint(2, 48)} hours.")
        lines = [f"{n}. {line}" for n, line in enumerate(lines, 1)]
    lines.insert(0, f"Account {account}:")
    return "\n".join(lines)


def _case(seed: int, broken: bool, variant: int = 0, account: str = "Q1RST1"
          ) -> tuple[str, str]:
    """A body's solo answer (its facts, from `seed`) and one loaded answer of it (worded
    by `variant`): the same facts, or one of them replaced."""
    rng = random.Random(seed)
    facts = {kind: _fact(rng, kind)
             for kind in rng.sample(list(_SENTENCES), rng.randint(2, 4))}
    solo = _answer(rng, facts, extra=False, account=account)
    if variant:
        rng = random.Random(f"{seed}/{variant}")
    loaded = dict(facts)
    if broken:
        kind = rng.choice(list(facts))
        loaded[kind] = _replaced(rng, kind, facts[kind])
    elif len(loaded) > 2 and rng.random() < 0.3:
        loaded.pop(rng.choice(list(loaded)))  # wording may leave a fact out
    return solo, _answer(rng, loaded, extra=rng.random() < 0.5, account=account)


def _judged(loaded: str, solo: str) -> ReferenceAgreement:
    """The reference rule after a greedy loaded answer and its solo answer."""
    rule = ReferenceAgreement(ReferenceConfig(requests=1))
    for d in ({"seq": 0, "phase": "measurement", "content": loaded},
              {"seq": 1, "phase": "reference", "content": solo}):
        d.update(item_id="i", body_hash="b", reasoning="", verdicts=["ok"], tool_calls=[],
                 greedy=True)
        r = RequestRecord.read(d)
        rule.observe(r, own_verdicts(r))
    return rule


def _mismatch(loaded: str, solo: str) -> bool:
    revisions = _judged(loaded, solo).revisions()
    return bool(revisions) and revisions[0].add == {Verdict.REFERENCE_MISMATCH}


@pytest.mark.parametrize("broken", [False, True], ids=["reworded", "figure replaced"])
def test_figures_are_compared_under_any_wording(broken: bool) -> None:
    wrong = []
    for seed in range(VARIANTS):
        solo, loaded = _case(seed, broken)
        if _mismatch(loaded, solo) != broken:
            wrong.append((seed, solo, loaded))
    assert not wrong, f"{len(wrong)}/{VARIANTS} judged wrong, first: {wrong[0]}"


def test_the_finding_names_the_replaced_figure() -> None:
    solo = "The total is 1,234.50 EUR for 12 seats."
    loaded = "You owe €1.243,50; the plan has 12 seats."
    assert contradictions(figures(loaded), figures(solo)) == [("EUR", "1.243,50",
                                                               "1,234.50")]
    finding = _judged(loaded, solo).revisions()[0].findings["reference_mismatch"]
    assert finding["detail"] == "'1.243,50' where the solo reply states '1,234.50' (EUR)"


@pytest.mark.parametrize("text,expected", [
    ("3 of 12 seats renew on 2026-12-01 at 10:30.",
     [("date", "2026-12-01"), ("time", "10:30"), (None, "3"), ("seat", "12")]),
    ("Step 1 and 2; 15 percent off US$ 40.",
     [(None, "1"), (None, "2"), ("%", "15"), ("USD", "40")]),
    ("It costs 7 dollars, 8 euros and 9 £.", [("USD", "7"), ("EUR", "8"), (None, "9")]),
    ("Q1RST1 has 4 users and 1 project.", [("user", "4"), ("project", "1")]),
])
def test_a_figure_is_keyed_by_what_it_counts(text: str, expected: list[tuple[str, str]]
                                             ) -> None:
    """A function word after a number is no unit; times and numbers inside dates or
    codes are not figures of their own; a sign after the number is not read as one."""
    assert [(f.unit, f.written) for f in figures(text)] == expected



def _served(fake_server: Any, tmp_path: Path, broken: bool) -> tuple[int, dict[str, Any]]:
    """Four bodies, each asked three times under load, then once alone: the solo reply
    states the body's facts one way, each loaded reply rewords them (and, broken,
    replaces one of them)."""
    fake, srv = fake_server(("scripted",))

    def script(body: dict[str, Any], fake: Any) -> dict[str, Any]:
        account = asked(body).account
        solo, loaded = _case(int(account[1]), broken, len(fake.seen) + 1, account)
        return {"reasoning": "Look the account up.",
                "content": solo if len(fake.seen) >= SERVED else loaded}

    fake.script = script
    lines = [orjson.dumps({"messages": [
        {"role": "user", "content": f"Hi, this is account Q{i}RST{i}."},
        {"role": "user", "content": "What do I owe, and when is it due?"}]})
        for i in range(1, 5)]
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_bytes(b"\n".join(lines) + b"\n")
    sc = write_scenario(tmp_path / "s.toml", {"load": {"measurement": SERVED},
                                              "request": {"max_tokens": 400},
                                              "gate": {"prove_below": 0.3}},
                        workload={"kind": "replay", "path": str(bodies)},
                        reference={"requests": 4, "when": "after"})
    out = tmp_path / "out"
    proc = run_cli("run", str(sc), "--base-url", srv.url, "--out", str(out), "--quiet")
    return proc.returncode, json.loads((out / "summary.json").read_text())


def test_served_a_reworded_answer_passes(fake_server, tmp_path: Path) -> None:
    code, summary = _served(fake_server, tmp_path, broken=False)
    assert code == 0, summary["gate"]["reasons"]
    assert summary["reference"]["compared"] == SERVED
    assert summary["reference"]["verifiable_mismatches"] == 0


def test_served_a_replaced_figure_fails_whatever_its_wording(fake_server, tmp_path: Path
                                                           ) -> None:
    code, summary = _served(fake_server, tmp_path, broken=True)
    assert code == 1, summary["gate"]["reasons"]
    verdicts = summary["phases"]["measurement"]["verdicts"]
    assert verdicts.get("reference_mismatch") == SERVED, verdicts


def test_one_digit_of_a_figure_changed_is_a_mismatch() -> None:
    """No shape at all: one digit of a solo answer's figures changed, nothing else. A
    date whose digit leaves the calendar (`2027-11-97`, `62th of November`) is a date
    unlike any, not a date dropped."""
    rng = random.Random(5)
    missed = []
    for seed in range(VARIANTS):
        solo, _ = _case(seed, broken=False)
        body = solo.index("\n")  # past "Account Q1RST1:"
        at = rng.choice([i for i, c in enumerate(solo) if c.isdigit() and i > body])
        loaded = solo[:at] + str((int(solo[at]) + rng.randint(1, 9)) % 10) + solo[at + 1:]
        if not _mismatch(loaded, solo):
            missed.append((solo, loaded))
    assert not missed, f"{len(missed)}/{VARIANTS} missed, first: {missed[0]}"
