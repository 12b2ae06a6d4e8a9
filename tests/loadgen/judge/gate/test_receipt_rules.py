"""The receipt rules on their own: what a candidate's receipts must show, and the statement.

The end-to-end cases (`tests/reliability/test_receipts_tied_to_the_server.py`) go through
`dsv4-qual run`; these are the branches a server there would take longer to stage.
"""

from __future__ import annotations

from typing import Any

from loadgen.judge.gate.receipt_rules import receipts_check, receipts_statement
from loadgen.scenario import GateConfig
from loadgen.targets.receipts import EndpointStart, ReceiptFacts, SetAside
from tests.support.receipts import api_server, receipt

URL, START = "http://s", "today"


def facts(receipts: list[dict[str, Any]], *, set_aside: int = 0) -> ReceiptFacts:
    return ReceiptFacts.from_dicts(
        receipts, endpoints=[EndpointStart(URL, (START,))],
        set_aside=[SetAside(f"old-{i}.json", "server id yesterday is no measured endpoint's "
                            "current start") for i in range(set_aside)])


def check(receipts: ReceiptFacts, **cfg: Any):  # type: ignore[no-untyped-def]
    return receipts_check(GateConfig(**{"require_receipts": True, **cfg}), receipts, "/r", 100)


def test_a_model_the_receipt_does_not_name_is_no_model_without_c128a_layers() -> None:
    result = check(facts([receipt(2, START, c128a=0, calls=0, architectures=[],
                                  model_type="")]))
    assert (result.passed, result.kind) == (False, "error")
    assert "do not say which model they loaded" in result.message


def test_a_model_process_that_does_not_say_where_it_sits_cannot_be_counted() -> None:
    data = receipt(2, START)
    del data["model"]["parallel"]
    result = check(facts([data]))
    assert (result.passed, result.kind) == (False, "error")
    assert "do not say which data-parallel rank and worker they are" in result.message


def test_only_other_starts_receipts_rest_on_the_replies_unless_required() -> None:
    receipts = facts([], set_aside=2)
    assert receipts.found == 2
    required = check(receipts)
    assert (required.passed, required.kind) == (False, "error")
    assert "no patch receipt in /r belongs to a measured endpoint's current server start" in \
        required.message
    relaxed = check(receipts, require_receipts=False)
    assert relaxed.passed and "the gate rests on the replies alone" in relaxed.message


def test_the_statement_names_a_controls_violations_and_says_nothing_of_a_clean_start() -> None:
    violating = facts([api_server(1, START), receipt(2, START, violations=7)])
    control = receipts_statement(GateConfig(role="control"), violating)
    assert control.startswith("The control's stride guard counted 7 C128A stride violation(s)")
    assert receipts_statement(GateConfig(), facts([receipt(2, START)])) == ""
    # A control's receipts are reported, never gated.
    assert check(violating, role="control").passed
