"""The reference rule compares a loaded reply's calls with the solo reply's by type:
nested arguments and lists leaf by leaf, numbers by value, parallel calls as a multiset.

Generated families: every change of any short leaf of any nested argument is a
`reference_mismatch`; the same calls in another order, numbers written as 42, 42.0 or
"42", and keys in another order are not.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.judge.run_level import own_verdicts
from loadgen.judge.run_level.reference import ReferenceAgreement
from loadgen.records import RequestRecord
from loadgen.scenario import ReferenceConfig
from loadgen.taxonomy import Verdict

_KEYS = st.sampled_from(["id", "sku", "qty", "account", "items", "order", "plan", "mode"])
_LEAVES = st.one_of(st.integers(-10**6, 10**6), st.booleans(),
                    st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,11}", fullmatch=True))
_ARGS = st.dictionaries(_KEYS, st.recursive(
    _LEAVES, lambda inner: st.one_of(st.lists(inner, min_size=1, max_size=3),
                                     st.dictionaries(_KEYS, inner, min_size=1, max_size=3)),
    max_leaves=8), min_size=1, max_size=4)


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": json.dumps(args)}}


def rec(seq: int, phase: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"seq": seq, "phase": phase, "item_id": "i", "body_hash": "b", "reasoning": "",
            "content": "", "verdicts": ["ok"], "tool_calls": calls, "greedy": True}


def mismatch(loaded: list[dict[str, Any]], solo: list[dict[str, Any]]) -> bool:
    rule = ReferenceAgreement(ReferenceConfig(requests=1))
    for d in (rec(0, "measurement", loaded), rec(1, "reference", solo)):
        r = RequestRecord.read(d)
        rule.observe(r, own_verdicts(r))
    revisions = rule.revisions()
    return bool(revisions) and revisions[0].add == {Verdict.REFERENCE_MISMATCH}


def paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in paths(v, (*path, i))]
    return [path]


def changed(value: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return value + 1
        return value + "x"
    copy = value.copy()
    copy[path[0]] = changed(value[path[0]], path[1:])
    return copy


@settings(max_examples=300, deadline=None)
@given(args=_ARGS, data=st.data())
def test_a_change_of_any_leaf_however_deep_is_a_mismatch(args: dict[str, Any],
                                                         data: st.DataObject) -> None:
    leaf = data.draw(st.sampled_from(paths(args)))
    assert mismatch([call("act", changed(args, leaf))], [call("act", args)])


@settings(max_examples=300, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(["look_up", "refund", "notify"]), _ARGS),
                      min_size=1, max_size=4), data=st.data())
def test_parallel_calls_in_another_order_agree(calls: list[tuple[str, dict[str, Any]]],
                                               data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(calls))))
    solo = [call(name, args) for name, args in calls]
    loaded = [call(*calls[i]) for i in order]
    # ...and with each call's keys written in another order.
    loaded = [call(c["function"]["name"],
                   dict(reversed(list(json.loads(c["function"]["arguments"]).items()))))
              for c in loaded]
    assert not mismatch(loaded, solo)


@settings(max_examples=200, deadline=None)
@given(value=st.integers(-10**9, 10**9), form=st.sampled_from(["int", "float", "str"]),
       nested=st.booleans())
def test_a_number_is_its_value_in_any_json_form(value: int, form: str, nested: bool) -> None:
    written: Any = {"int": value, "float": float(value), "str": str(value)}[form]
    solo, loaded = {"qty": value}, {"qty": written}
    if nested:
        solo, loaded = {"order": {"lines": [solo]}}, {"order": {"lines": [loaded]}}
    assert not mismatch([call("act", loaded)], [call("act", solo)])
    other = {"qty": value + 1}
    assert mismatch([call("act", {"order": {"lines": [other]}} if nested else other)],
                    [call("act", solo)])


def test_a_call_dropped_or_added_is_a_mismatch() -> None:
    both = [call("look_up", {"id": "A1"}), call("refund", {"id": "A1", "qty": 2})]
    assert mismatch(both[:1], both) and mismatch(both + both[:1], both)
