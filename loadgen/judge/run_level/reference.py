"""`reference_mismatch`: a loaded reply that disagrees with the same body's solo reply.

The reference phase sends a sample of the measured bodies one at a time to the idle
server: with nothing else in flight no decode row can read another request's, so the
solo reply is what this server says when the bug cannot fire. Each loaded reply of a
sampled body is compared with it:

- its **verifiable fields** exactly: whether it answered with a tool call or in prose,
  the functions called (parallel calls as a multiset: in any order) and their short
  scalar arguments however deep (nested objects and lists leaf by leaf; ids, enums,
  numbers by value, `42` as `42.0` or `"42"`: values without spaces), the codes an
  answer states (in any case or look-alike letters) and
  the numbers it states, each under its label (the words beside it: "12 seats", "total
  is 1,234.50"; a number under a label only one of the two replies uses is not
  compared) and the figures it states under any wording, keyed by what they count (a
  currency however written, a percent, the counted word, a date in any format:
  "you owe €1,243.50" contradicts "the total is 1,234.50 EUR";
  `judge.text.quantities`); numbers and figures only where decoding is greedy. A
  difference is
  `reference_mismatch`, gated by default: greedy decoding of
  one body may word things differently under load, but it does not act on another
  account, call another function or state another figure. What must agree is compared,
  not the path taken: where the workload names the lookups a correct reply may make
  first (`expected.call.steps`), a reply that looks the account up before acting, or
  acts at once, agrees with one that did the other on the accounts both touch; the
  actions are compared where both replies took one (at temperature above 0 too);
- its **free text** by how far the two agree: the first character where the visible
  answers (and, apart, the reasonings) part, and their similarity (rapidfuzz's Indel
  ratio over the first `SIMILARITY_CHARS` characters), reported per request and as a
  distribution, and gated
  on the whole text (reasoning, content and calls word for word) only where the scenario
  declares the server batch-invariant (`reference.batch_invariant`).

A solo reply that is itself broken (stuck, garbled, ...) is no oracle: its body's loaded
replies are not held to it (the report says so), though how far they agree with it is
still reported; a solo request that got no reply at all is left out. The server failing
alone is a failure of its own: the gate counts the reference phase's gated verdicts, and
a reference phase that left no oracle at all makes the run invalid (`judge.gate.gate`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
import regex
from rapidfuzz.distance import Indel, Prefix

from loadgen.expectations import Expectation, is_code
from loadgen.judge.reply.family import Family, Finding
from loadgen.judge.run_level import Revision, completed
from loadgen.judge.text.code_forms import fold_code, forms
from loadgen.judge.text.quantities import Figure, contradictions, figures
from loadgen.records import RequestRecord
from loadgen.scenario import ReferenceConfig
from loadgen.taxonomy import DEFAULT_FAIL_ON, Verdict


class ReferenceMismatch(Finding):
    """How a loaded reply differs from its solo reply (the reference rule)."""

    reference_seq: int = -1
    field: str = ""
    loaded: str = ""
    reference: str = ""
    detail: str = ""

#: Similarity is measured on this many leading characters of each answer (the cost of an
#: edit distance grows with the product of the lengths).
SIMILARITY_CHARS = 8000
#: Loaded replies per sampled body whose text is kept for the agreement distribution.
TEXTS_PER_BODY = 8
_SHORT_VALUE = 64
_PLAIN_NUMBER = regex.compile(r"-?\d+(?:\.\d+)?")
_BROKEN = frozenset(v.value for v in DEFAULT_FAIL_ON)


def _scalar(value: Any) -> bool:
    if isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and len(value) <= _SHORT_VALUE and not any(
        c.isspace() for c in value)


def _canonical(value: Any) -> str:
    """A scalar as its type reads it: a number by its value (`42`, `42.0` and `"42"` are
    one number), a boolean as JSON writes it, text case-folded."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) or (isinstance(value, str)
                                          and _PLAIN_NUMBER.fullmatch(value)):
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            return str(value).casefold()
        if number.is_finite():
            return format(number.normalize(), "f")
    return str(value).casefold()


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, value) of every short scalar a call's arguments hold, however deep:
    `{"order": {"items": [{"sku": "A1"}]}}` holds `order.items[0].sku` = `a1`. Nested
    objects and lists are compared leaf by leaf, a list in its order."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from leaves(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from leaves(inner, f"{path}[{i}]")
    elif value is not None and _scalar(value):
        yield path, _canonical(value)


def _code_of(value: str) -> str | None:
    """A value that is a code (in any case or look-alike letters), as the code."""
    folded = fold_code(value).upper()
    return folded if is_code(folded) else None


def verifiable(record: RequestRecord) -> tuple[Any, ...]:
    """What a loaded reply must share with its solo reply: the calls and their short
    scalar arguments, or an answer's codes and figures."""
    calls = []
    for call in record.tool_calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        try:
            args = orjson.loads(fn.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            args = None
        fields = (tuple(sorted(set(leaves(args)))) if isinstance(args, dict)
                  else ("<not a JSON object>",))
        calls.append((str(fn.get("name") or ""), fields))
    if calls:
        # Parallel calls are a multiset: the same calls in another order agree.
        return ("tool_calls", tuple(sorted(calls, key=repr)))
    content = record.content or ""
    codes = {code for form in forms(content) if (code := _code_of(form.folded))
             and content[form.start:form.end].isalnum()}
    # Numbers only where decoding was greedy: sampling may honestly word a figure that
    # is no fact of the request ("in 2 steps", "in 3 steps"); codes are facts either way.
    stated = tuple(figures(content)) if record.greedy else ()
    return ("answer", tuple(sorted(codes)), stated)


def _accounts(calls: tuple[Any, ...]) -> set[str]:
    """The codes the calls pass (the accounts they look up or act on)."""
    return {code for _, fields in calls for field in fields if isinstance(field, tuple)
            and (code := _code_of(str(field[1])))}


def difference(loaded: tuple[Any, ...], solo: tuple[Any, ...],
               steps: frozenset[str]) -> bool:
    """Whether a loaded reply disagrees with its solo reply on what must agree."""
    if loaded[0] != solo[0]:
        return True
    if loaded[0] == "answer":
        if loaded[1] != solo[1]:
            return True
        return bool(contradictions(loaded[2], solo[2]))
    if not steps:
        return loaded != solo
    acts = [tuple(c for c in side[1] if c[0] not in steps) for side in (loaded, solo)]
    if acts[0] and acts[1] and acts[0] != acts[1]:
        return True
    return _accounts(loaded[1]) != _accounts(solo[1])


def answer_text(record: RequestRecord) -> str:
    """The visible answer: the content, then each call as `name(arguments)`."""
    calls = []
    for call in record.tool_calls or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            fn = {}
        calls.append(f"{fn.get('name')}({fn.get('arguments')})")
    return "\n".join([record.content or "", *calls])


def _text_key(record: RequestRecord) -> bytes:
    return hashlib.blake2b(orjson.dumps([record.reasoning or "", answer_text(record)]),
                           digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class _Reply:
    seq: int
    item_id: str
    verifiable: tuple[Any, ...]
    key: bytes
    answer: str | None  # kept for the agreement distribution (a bounded sample)
    reasoning: str | None
    steps: frozenset[str]  # lookups a correct reply may make first (the expectation's)


def _steps(record: RequestRecord) -> frozenset[str]:
    exp = Expectation.read(record.expected)
    return frozenset(exp.call.steps) if exp is not None and exp.call is not None \
        else frozenset()


def _reply(record: RequestRecord, keep_text: bool) -> _Reply:
    return _Reply(int(record.seq), str(record.item_id or ""),
                  verifiable(record), _text_key(record),
                  answer_text(record) if keep_text else None,
                  (record.reasoning or "") if keep_text else None, _steps(record))


def agreement(loaded: str, solo: str) -> dict[str, Any]:
    """How far two answers agree: where they first part, and how similar they are."""
    first = Prefix.similarity(loaded, solo)
    return {"first_divergence": None if loaded == solo else first,
            "similarity": round(Indel.normalized_similarity(loaded[:SIMILARITY_CHARS],
                                                            solo[:SIMILARITY_CHARS]), 4)}


class ReferenceAgreement:
    """The rule: measured replies of sampled bodies against their solo replies."""

    name = "reference"

    def __init__(self, cfg: ReferenceConfig) -> None:
        self.cfg = cfg
        self._solo: dict[str, _Reply] = {}  # body hash -> its solo reply
        self._unusable: dict[str, str] = {}  # body hash -> why its solo reply is no oracle
        self._loaded: dict[str, list[_Reply]] = {}  # body hash -> its measured replies
        self._texts: dict[str, int] = {}

    def observe(self, record: RequestRecord, own: list[str]) -> None:
        body = str(record.body_hash or "")
        if not body:
            return
        phase = record.phase  # a line without one is a measured one (`RequestRecord.read`)
        if phase == "reference":
            broken = sorted(_BROKEN.intersection(own))
            if not completed(own):
                self._unusable[body] = ", ".join(own)
                return
            if broken:  # no oracle, but how far loaded replies agree with it still tells
                self._unusable[body] = ", ".join(broken)
            self._solo[body] = _reply(record, keep_text=True)
        elif phase == "measurement" and completed(own):
            keep = self._texts.get(body, 0) < TEXTS_PER_BODY
            self._texts[body] = self._texts.get(body, 0) + keep
            self._loaded.setdefault(body, []).append(_reply(record, keep_text=keep))

    def revisions(self) -> dict[int, Revision]:
        out: dict[int, Revision] = {}
        for body, solo in self._oracles():
            for reply in self._loaded.get(body, []):
                differs = self._difference(reply, solo)
                if differs is not None:
                    # Only the fields this difference has: a text mismatch has no
                    # `loaded` or `reference`, and its record has no such keys.
                    out[reply.seq] = Revision(add={Verdict.REFERENCE_MISMATCH}, findings={
                        "reference_mismatch": differs.model_dump(mode="json",
                                                                 exclude_unset=True)})
        return out

    def _difference(self, reply: _Reply, solo: _Reply) -> ReferenceMismatch | None:
        if difference(reply.verifiable, solo.verifiable, reply.steps | solo.steps):
            replaced = (contradictions(reply.verifiable[2], solo.verifiable[2])
                        if reply.verifiable[0] == solo.verifiable[0] == "answer" else [])
            detail = {}  # set only where a figure was replaced
            for unit, mine, theirs in replaced[:1]:
                detail["detail"] = f"{mine!r} where the solo reply states {theirs!r} ({unit})"
            return ReferenceMismatch(reference_seq=solo.seq, field="verifiable",
                                     loaded=_shown(reply.verifiable),
                                     reference=_shown(solo.verifiable), **detail)
        if self.cfg.batch_invariant and reply.key != solo.key:
            return ReferenceMismatch(
                reference_seq=solo.seq, field="text",
                detail="the server is declared batch-invariant: the whole reply must "
                "match its solo reply word for word")
        return None

    def _oracles(self) -> list[tuple[str, _Reply]]:
        """Solo replies that are not broken themselves: what loaded replies are held to."""
        return [(body, solo) for body, solo in self._solo.items() if body not in self._unusable]

    def summary(self) -> ReferenceSummary:
        """Per request and as a distribution: how loaded replies agree with solo ones (the
        text of every completed solo reply; the verifiable fields of the oracles only)."""
        rows = []
        compared = mismatched = 0
        for body, solo in self._solo.items():
            oracle = body not in self._unusable
            for reply in self._loaded.get(body, []):
                same = not difference(reply.verifiable, solo.verifiable,
                                      reply.steps | solo.steps)
                if oracle:
                    compared += 1
                    mismatched += not same
                if reply.answer is not None and solo.answer is not None:
                    thought = agreement(reply.reasoning or "", solo.reasoning or "")
                    rows.append({"seq": reply.seq, "reference_seq": solo.seq,
                                 "item_id": reply.item_id, "oracle": oracle,
                                 "verifiable_equal": same,
                                 "identical": reply.key == solo.key,
                                 **agreement(reply.answer, solo.answer),
                                 "reasoning_first_divergence": thought["first_divergence"],
                                 "reasoning_similarity": thought["similarity"]})
        sims = sorted(r["similarity"] for r in rows)
        thoughts = sorted(r["reasoning_similarity"] for r in rows)
        return ReferenceSummary(
            solo_replies=len(self._solo),
            oracles=len(self._oracles()),
            unusable=dict(sorted(self._unusable.items())),
            compared=compared,
            verifiable_mismatches=mismatched,
            identical=sum(r["identical"] for r in rows),
            texts_compared=len(rows),
            similarity=_quantiles(sims),
            reasoning_similarity=_quantiles(thoughts),
            batch_invariant=self.cfg.batch_invariant,
            per_request=sorted(rows, key=lambda r: (r["similarity"], r["seq"]))[:200],
        )


@dataclass(frozen=True)
class ReferenceSummary:
    """How the loaded replies agree with the solo ones: summary.json's `reference`
    (`to_dict`), and what the gate and every report read, by attribute."""

    solo_replies: int  # bodies answered alone
    oracles: int  # of them usable (not broken alone)
    unusable: dict[str, str]  # body -> why its solo reply is no oracle
    compared: int  # loaded replies held to an oracle
    verifiable_mismatches: int
    identical: int  # loaded replies word for word their solo reply's
    texts_compared: int
    similarity: dict[str, float | None]  # quantiles of the answers' similarity
    reasoning_similarity: dict[str, float | None]
    batch_invariant: bool
    per_request: list[dict[str, Any]]  # the 200 least similar, one row a loaded reply

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _shown(fields: tuple[Any, ...]) -> str:
    return orjson.dumps(fields, default=_plain,
                        option=orjson.OPT_PASSTHROUGH_DATACLASS).decode()[:300]


def _plain(value: Any) -> Any:
    """A figure as the reply wrote it (its readings are how it was compared)."""
    if isinstance(value, Figure):
        return [value.unit, value.written]
    raise TypeError


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"min": None, "p10": None, "p50": None, "max": None}

    def q(p: float) -> float:
        return values[min(len(values) - 1, int(p * (len(values) - 1) + 0.5))]

    return {"min": values[0], "p10": q(0.10), "p50": q(0.50), "max": values[-1]}


def _describe(found: Mapping[str, Any]) -> list[str]:
    mismatch = found["reference_mismatch"]
    return [] if mismatch is None else [
        f"unlike its solo reply (seq {mismatch.reference_seq}): {mismatch.field}: loaded "
        f"{mismatch.loaded} vs alone {mismatch.reference}{mismatch.detail}"]


#: Its knobs are the scenario's `[reference]` section, which also sets the phase.
FAMILY = Family(name="reference", verdicts=frozenset({Verdict.REFERENCE_MISMATCH}),
                findings={"reference_mismatch": ReferenceMismatch | None},
                describe=_describe)
