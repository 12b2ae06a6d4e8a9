"""Tool-turn replies read through a transport, one pool, in turn: what the transport
conformance suites (generated wire writings, real servers) compare across transports."""

from __future__ import annotations

from loadgen.engine.client import ChatClient, Timeouts
from loadgen.engine.transport import make_http_client
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from loadgen.workload.tools import BILLING_TOOLS, offered_tools


async def read_in_turn(transport: str, url: str, bodies: list[bytes],
                       timeouts: Timeouts) -> list[RequestRecord]:
    """Each body sent in turn by one client on `transport` (kept connections reused),
    its record judged as the tool turn it answers."""
    records: list[RequestRecord] = []
    async with make_http_client(transport, 4, True, timeouts.connect) as http:
        client = ChatClient(http, timeouts)
        for k, body in enumerate(bodies):
            record = RequestRecord(
                run_id="r", scenario="s", phase="measurement", seq=k, endpoint=url,
                item_id="i", params={"tools": offered_tools(BILLING_TOOLS),
                                     "tool_choice": None, "expects_tool_call": True})
            await client.send(record, body, True)
            record.verdicts = classify(record, VerdictConfig())
            records.append(record)
    return records


def reply_of(record: RequestRecord) -> tuple[object, ...]:
    """What every transport must read alike: status, error, text, calls, finish, usage,
    verdicts."""
    return (record.status, record.error, record.reasoning, record.content,
            record.tool_calls, record.finish_reason, record.usage.completion_tokens,
            record.usage.reasoning_tokens, record.usage.prompt_tokens, record.verdicts)
