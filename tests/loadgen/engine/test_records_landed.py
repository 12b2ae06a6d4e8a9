"""What the parent of worker processes reads of each record as it lands (`Landed`): the
figures of a record this release wrote, and nothing from a line that is not one."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from loadgen.records import ErrorKind, Landed, RequestRecord, Usage


def record(**kw: object) -> RequestRecord:
    return RequestRecord(run_id="r", scenario="s", phase="measurement", seq=7,
                         endpoint="http://a:8000", item_id="i7", **kw)  # type: ignore[arg-type]


def test_a_written_record_reads_as_it_was_written() -> None:
    line = record(verdicts=["connect_error"], error="refused", error_kind=ErrorKind.CONNECT,
                  usage=Usage(completion_tokens=12)).to_json()
    landed = Landed.model_validate_json(line)
    assert (landed.seq, landed.endpoint, landed.verdicts, landed.completion_tokens,
            landed.error, landed.error_kind) == (
        7, "http://a:8000", ["connect_error"], 12, "refused", ErrorKind.CONNECT)
    assert landed.error_kind is not None and landed.error_kind.server_gone


def test_what_a_record_left_out_reads_as_nothing_known() -> None:
    landed = Landed.model_validate_json(b'{"seq": 3, "verdicts": ["ok"], "usage": null, '
                                        b'"error_kind": "some_new_kind"}')
    assert (landed.completion_tokens, landed.error, landed.error_kind, landed.endpoint) == (
        0, None, None, "")


@pytest.mark.parametrize("line", [
    b'{"seq": 3, "verdicts": ["ok"]',  # torn by a killed writer
    b"",
    b'["seq", 3]',
    b'{"seq": 3}',  # no verdicts: not a record this release wrote
    b'{"seq": 3, "verdicts": []}',
    b'{"verdicts": ["ok"]}',
])
def test_a_line_that_is_not_a_record_is_refused(line: bytes) -> None:
    with pytest.raises(ValidationError):
        Landed.model_validate_json(line)
