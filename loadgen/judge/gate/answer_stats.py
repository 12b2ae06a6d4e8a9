"""How many measured replies had an answer checked exactly, how many failed, and where.

A gate's "clean" is worth what its checks are: a reply whose request carries a known
answer (`Expectation.checkable`: a call's arguments, facts an answer must state, known
answers) is judged by that answer, whatever shape a corruption takes; a reply without
one (a replayed production body) only by the detectors of failure shapes. Every
statement therefore says how many measured replies were *checked*, and bounds the
failure rate among them.

The same pass keeps, for each reply, the groups it belongs to (`groups_of`): its probe
family, a session turn's regime, the shared prefix it was sent over, reasoning on or off,
its prompt length, whether the server's prefix cache served part of it. The reports give
the failure rate of each group, so a failure that only long prompts, prompts whose length
is 3 mod 4, cache hits or tool loops show stands out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from loadgen.bounds import upper_bound
from loadgen.expectations import Expectation
from loadgen.records import RequestRecord

#: Verdicts that say the answer itself was wrong (beside it, any gated verdict fails it).
ANSWER_VERDICTS = frozenset({"wrong_answer", "cross_talk", "stale_answer"})
#: Groups of one kind with more values than this are not tabulated (a breakdown of a
#: thousand values says nothing).
MAX_VALUES = 32


def _size_bucket(tokens: int) -> str:
    """Prompt tokens as a power-of-two range: `1024-2047`."""
    if tokens < 256:
        return "<256"
    low = 1 << (tokens.bit_length() - 1)
    return f"{low}-{2 * low - 1}"


def groups_of(rec: RequestRecord) -> tuple[tuple[str, str], ...]:
    """The (kind, value) groups a reply is counted in."""
    params = rec.params
    found = params.get("tags")
    tags: dict[str, Any] = found if isinstance(found, dict) else {}
    item = str(rec.item_id or "")
    probe = tags.get("probe") or item.split("/", 1)[0]
    if probe.startswith("mix"):  # a mix part: its own kind
        probe = item.split("/", 2)[1] if item.count("/") >= 2 else probe
    out: list[tuple[str, str]] = [("probe", str(probe))]
    for key in ("turn", "prefix_tokens"):
        if tags.get(key):
            out.append((key, str(tags[key])))
    if params.get("reasoning") in ("on", "off"):
        out.append(("reasoning", str(params["reasoning"])))
    prompt = rec.usage.prompt_tokens
    if isinstance(prompt, int) and prompt > 0:
        out.append(("prompt tokens", _size_bucket(prompt)))
        if probe == "needle":
            out.append(("prompt tokens mod 4", str(prompt % 4)))
    cached = rec.usage.cached_tokens
    if isinstance(cached, int):
        out.append(("prefix cache", "hit" if cached > 0 else "miss"))
    return tuple(out)


@dataclass
class AnswerStats:
    """One phase's checked answers and groups, counted as records are read."""

    checked: set[int] = field(default_factory=set)  # seqs of replies with a known answer
    groups: dict[int, tuple[tuple[str, str], ...]] = field(default_factory=dict)

    def add(self, rec: RequestRecord, replied: bool) -> None:
        """Count one record (`replied`: the model answered: no infrastructure error)."""
        if not replied:
            return
        seq = int(rec.seq)
        exp = Expectation.read(rec.expected)
        if exp is not None and exp.checkable:
            self.checked.add(seq)
        self.groups[seq] = groups_of(rec)

    def summary(self, failing: set[int], wrong: set[int]) -> CheckedAnswers:
        """The figures, given the phase's final failing seqs and those whose answer was
        wrong (`ANSWER_VERDICTS`)."""
        failed = len(self.checked & failing)
        counts: dict[str, dict[str, list[int]]] = defaultdict(dict)
        for seq, groups in self.groups.items():
            for kind, value in groups:
                cell = counts[kind].setdefault(value, [0, 0])
                cell[0] += 1
                cell[1] += seq in failing
        breakdown = {kind: {value: Cell(n, f) for value, (n, f) in sorted(values.items())}
                     for kind, values in counts.items()
                     if 1 < len(values) <= MAX_VALUES or kind == "probe"}
        checked = len(self.checked)
        return CheckedAnswers(
            checked=checked, failed=failed, wrong=len(self.checked & wrong),
            upper_bound_95=upper_bound(failed, checked) if checked else None,
            breakdown=breakdown)


@dataclass(frozen=True)
class Cell:
    requests: int
    failed: int

    @property
    def rate(self) -> float:
        return self.failed / self.requests if self.requests else 0.0


@dataclass(frozen=True)
class CheckedAnswers:
    """summary.json's `phases.<phase>.answers`."""

    checked: int  # replies with an answer checked exactly
    failed: int  # of those, replies that failed the gate (any gated verdict)
    wrong: int  # of those, replies whose answer itself was wrong (ANSWER_VERDICTS)
    upper_bound_95: float | None  # of the failure rate among checked replies
    breakdown: dict[str, dict[str, Cell]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "failed": self.failed, "wrong": self.wrong,
                "upper_bound_95": self.upper_bound_95,
                "breakdown": {kind: {value: {"requests": c.requests, "failed": c.failed}
                                     for value, c in values.items()}
                              for kind, values in self.breakdown.items()}}
