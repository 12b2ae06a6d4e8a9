"""Rule families are declared whole in their modules and registered: what the register
says of each family is what the judge does.

Generated replies of every broken shape the suites know (salad of each family in each
place, another language, a sentence cut, a ramble, a reply stuck in its reasoning, a
leak, an abnormal finish, a looping argument, a missing or unknown tool call) are judged
family by family: a family gives only the verdicts it declares and writes only the
findings it declares, each of which reads back whole through its declared type and gets
its report line; `classify` is exactly the families' union. And every verdict of the
taxonomy that judges output is declared by a family, once the run-level ones are
counted, so none is given by code that no family owns.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from loadgen.expectations import Expectation, ExpectedCall
from loadgen.judge.findings import FAMILIES as ALL_FAMILIES
from loadgen.judge.reply import FAMILIES, VerdictConfig
from loadgen.judge.reply.family import Found
from loadgen.judge.reply.sequence import stream_facts
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord, Timings, Usage
from loadgen.taxonomy import INFRA_VERDICTS, RUN_LEVEL, Verdict
from tests.support import broken_servers, broken_text

CFG = VerdictConfig()
#: Findings that explain a verdict spared rather than given: no line in a report.
SILENT = {"asked_repetition"}


def _record(text: str, place: str, finish: str = "stop",
            params: dict[str, Any] | None = None) -> RequestRecord:
    fields: dict[str, Any] = {"reasoning": "Answer the question.", "content": ""}
    calls: list[dict[str, Any]] = []
    if place == "reasoning":
        fields["reasoning"] = text
    elif place == "content":
        fields["content"] = text
    else:
        calls = [broken_servers._call("send_email", account_id="XEHM4B", subject="Update",
                                      body=text)]
        finish = "tool_calls" if finish == "stop" else finish
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                         endpoint="http://x", item_id="i", params=params or {},
                         finish_reason=finish, tool_calls=calls, **fields)


def _facts(rng: random.Random) -> dict[str, str]:
    return {"account_id": broken_text._code(rng), "plan": rng.choice(broken_text.PLANS)}


def _other_turns(rng: random.Random) -> list[RequestRecord]:
    """A reply stating a value its request did not give, one calling with it, one whose
    deltas were sent twice, one whose usage is below what it streamed."""
    facts = _facts(rng)
    answer = Expectation(facts=facts, distinctive=("account_id",), answer=("account_id",))
    call = Expectation(facts=facts, distinctive=("account_id",),
                       call=ExpectedCall("change_plan", {"account_id": "account_id",
                                                         "plan": "plan"}, ()))
    wrong = _facts(rng)["account_id"]
    said = _record(f"The account is {wrong}.", "content")
    said.expected = answer.to_dict()
    called = _record("", "content", "tool_calls")
    called.tool_calls = [broken_servers._call("change_plan", account_id=wrong,
                                              plan=facts["plan"])]
    called.expected = call.to_dict()
    deltas = [f"Checking account {facts['account_id']} and its {facts['plan']} plan now. ",
              "Then I will move it as the user asked, with care. "]
    doubled = _record("".join(deltas * 2), "reasoning")
    doubled.sequence = stream_facts(deltas * 2, [], 0)
    counted = _record("Done.", "content")
    counted.status = 200
    counted.params = {"max_tokens": 100, "stream": True}
    counted.usage = Usage(completion_tokens=rng.randint(1, 5))
    counted.timings = Timings(chunks=rng.randint(9, 40))
    return [said, called, doubled, counted]


def _corpus() -> list[RequestRecord]:
    out = []
    for seed in range(4):
        rng = random.Random(f"declared/{seed}")
        words = rng.choice((20, 60, 120))
        for make in broken_text.TEXT_FAMILIES.values():
            for place in ("reasoning", "content", "argument"):
                out.append(_record(make(seed, words), place))
        out.append(_record(broken_text.other_language(seed, words), "content"))
        out.append(_record(broken_text.cut_mid_sentence(seed, words), "content"))
        out.append(_record(broken_text.ramble(seed, words), "content", "length"))
        unit = rng.choice(["Let me check the plan again. ", "Wait, the account. "])
        out.append(_record(unit * (words // 2), "reasoning", "length"))
        out.append(_record(unit * (words // 2), "content", "stop"))
        out.append(_record(unit * (words // 2), "argument", "length"))
        out.append(_record(f"Done.</think> {unit}", "content"))
        out.append(_record("The plan is", "content", rng.choice(["abort", "error", ""])))
        out.append(_record("", "content", rng.choice(["stop", "length"])))
        out.append(_record("Moved.", "content", params={"expects_tool_call": True}))
        out.append(_record("Sent.", "argument",
                           params={"tools": {"change_plan": ["account_id"]}}))
        out += _other_turns(rng)
    return out


CORPUS = _corpus()


def test_every_reply_family_checks_and_every_run_level_one_does_not() -> None:
    assert all(f.check is not None for f in FAMILIES)
    run_level = [f for f in ALL_FAMILIES if f not in FAMILIES]
    assert run_level and all(f.check is None for f in run_level)


def test_the_families_declare_every_verdict_on_output_and_nothing_else() -> None:
    declared = [v for f in ALL_FAMILIES for v in f.verdicts]
    not_output = {*INFRA_VERDICTS, Verdict.INTERRUPTED, Verdict.OK}
    assert set(declared) == set(Verdict) - not_output
    # A reply's family never declares a verdict only the whole run can give.
    assert not {v for f in FAMILIES for v in f.verdicts} & (RUN_LEVEL - {Verdict.REASONING_LOOP})


def test_no_two_families_write_one_finding_or_read_one_knob() -> None:
    keys = [k for f in ALL_FAMILIES for k in f.findings]
    assert len(keys) == len(set(keys))
    groups = [set(f.knobs.model_fields) for f in FAMILIES if f.knobs is not None]
    assert sum(map(len, groups)) == len(set().union(*groups))


def test_the_verdicts_section_is_exactly_the_families_knobs() -> None:
    knobs = [f.knobs for f in FAMILIES if f.knobs is not None]
    assert all(issubclass(VerdictConfig, k) for k in knobs)
    assert set(VerdictConfig.model_fields) == {n for k in knobs for n in k.model_fields}


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_a_family_gives_and_writes_only_what_it_declares(family: Any) -> None:
    given: set[Verdict] = set()
    for record in CORPUS:
        found = family.check(record, CFG)
        if found is None:
            continue
        assert isinstance(found, Found)
        assert found.verdicts <= family.verdicts, (family.name, found.verdicts)
        assert set(found.findings) <= set(family.findings), (family.name, found.findings)
        written = orjson.loads(orjson.dumps(found.findings))
        typed = {key: family.read(written, key) for key in family.findings}
        for key, value in written.items():
            got = typed[key]
            dumped = [g.model_dump(exclude_unset=True) if hasattr(g, "model_dump") else g
                      for g in got] if isinstance(got, list) else \
                got.model_dump(exclude_unset=True) if hasattr(got, "model_dump") else got
            assert dumped == value, (family.name, key)
        if set(written) - SILENT:
            assert family.describe(typed), (family.name, written)
        given |= found.verdicts
    assert given, f"the corpus never trips {family.name}"


def test_classify_is_the_union_of_the_families() -> None:
    for record in CORPUS:
        verdicts = set(classify(record, CFG)) - {"ok"}
        findings = dict(record.findings)
        union: set[str] = set()
        written: dict[str, Any] = {}
        for family in FAMILIES:
            found = family.check(record, CFG)
            if found is not None:
                union |= {v.value for v in found.verdicts}
                written.update(found.findings)
        assert verdicts == union
        assert findings == written
