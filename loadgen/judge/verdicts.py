"""RequestRecord -> verdicts: the rule families of one reply (`judge.reply.FAMILIES`),
composed.

A record can carry several verdicts; `classify` orders them most severe first. Each
family says what its verdicts mean where it is declared:

- stuck_in_reasoning, empty_content, truncated, abnormal_finish: how the reply ended
  (`judge.reply.finish`);
- reasoning_loop: reasoning or content ends in a loop (`judge.reply.loops`), unless the
  content repeats a sentence the request quoted as often as it asked;
- token_leak (`judge.reply.leaks`), disordered_stream (`judge.reply.sequence`),
  usage_mismatch (`judge.reply.usage`), garbled (`judge.reply.garbled`);
- no_tool_call / bad_tool_call / tool_args_loop: tool turns (`judge.reply.tool_calls`);
- wrong_answer / stale_answer: the request's own facts or known answers
  (`judge.reply.substance`);
- wrong_language / unfinished: fluent prose that is still wrong
  (`judge.reply.reply_language`);
- http_error / timeout / stream_error: the path to the model failed; no output rule
  is applied to such a record;
- divergent, cross_talk, reference_mismatch: run level (`judge.run_level`), never set
  on a single record here.
"""

from __future__ import annotations

from typing import Any

from loadgen.judge.reply import FAMILIES, VerdictConfig
from loadgen.records import ErrorKind, RequestRecord
from loadgen.taxonomy import Verdict, by_severity

_INFRA_VERDICT: dict[ErrorKind, Verdict] = {
    ErrorKind.INTERRUPTED: Verdict.INTERRUPTED,
    ErrorKind.TIMEOUT: Verdict.TIMEOUT,
    ErrorKind.STREAM: Verdict.STREAM_ERROR,
    ErrorKind.BROKEN: Verdict.STREAM_ERROR,
    ErrorKind.HTTP: Verdict.HTTP_ERROR,
    ErrorKind.CONNECT: Verdict.HTTP_ERROR,
    ErrorKind.TRANSPORT: Verdict.HTTP_ERROR,
}


def infra_verdict(record: RequestRecord) -> Verdict | None:
    """The transport-level failure of a record, if any (by its error kind)."""
    if record.error_kind is None:
        return None
    return _INFRA_VERDICT[record.error_kind]


#: Every family of one reply checks one reply (a test holds that none lacks its check).
_CHECKS = tuple(family.check for family in FAMILIES if family.check is not None)


def classify(record: RequestRecord, cfg: VerdictConfig) -> list[str]:
    """All verdicts of one record, most severe first; ['ok'] when clean.

    What each family found goes into `record.findings` (the loop's unit, the leaked
    token, the tool call's problem): the forensics a person needs to judge the verdict.
    """
    infra = infra_verdict(record)
    if infra is not None:
        return [infra.value]
    found: set[Verdict] = set()
    findings: dict[str, Any] = {}
    for check in _CHECKS:
        outcome = check(record, cfg)
        if outcome is not None:
            found |= outcome.verdicts
            findings.update(outcome.findings)
    record.findings = findings
    if not found:
        return [Verdict.OK.value]
    return [v.value for v in by_severity(found)]
