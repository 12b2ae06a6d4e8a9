"""Request bodies and the records that will hold their replies.

The scenario's sampling settings fill what a work item leaves open; the keys the
engine must own to measure (model, stream, stream_options) are always its own. A
body is serialised once per item and its hash lets identical greedy requests be
compared after the run.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import orjson

from loadgen.judge.request_profile import request_profile
from loadgen.records import RequestRecord
from loadgen.scenario import Scenario
from loadgen.workload import WorkItem
from loadgen.workload.tools import forces_a_call, offered_tools

BODY_CACHE_ITEMS = 512


class Prepared(NamedTuple):
    raw: bytes
    body_hash: str
    #: What the request offered (params: tools as name -> required keys, tool_choice,
    #: expects_tool_call, `scripts`: its texts' scripts beyond Latin, when it has any,
    #: and `languages`: those its texts are written in or name), so the verdicts know
    #: what a healthy reply is.
    offered: dict[str, Any]
    #: What a correct reply contains (the item's expectation as records keep it).
    expected: dict[str, Any] | None


#: What a record keeps of its request's last message: enough for a person to see what was
#: asked (a long document's question is at its end).
ASK_CHARS = 240


def _ask(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    text = " ".join(text.split())
    return text if len(text) <= ASK_CHARS else "…" + text[-(ASK_CHARS - 1):]


class RequestMaker:
    def __init__(self, scenario: Scenario, run_id: str, model: str, worker: int = 0) -> None:
        self._scenario = scenario
        self._run_id = run_id
        self._model = model
        self._worker = worker
        self._bodies: dict[str, Prepared] = {}

    def body(self, item: WorkItem) -> Prepared:
        """The body as it is sent, its hash, and what it offered."""
        cached = self._bodies.get(item.item_id)
        if cached is not None:
            return cached
        req = self._scenario.request
        body: dict[str, Any] = {
            "max_tokens": req.max_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p,
        }
        if req.seed is not None:
            body["seed"] = req.seed
        kwargs = dict(req.chat_template_kwargs)
        if item.reasoning is not None:  # this request's reasoning, on or off
            kwargs[req.reasoning_switch] = item.reasoning
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        body.update(req.extra_body)
        body.update(item.body)
        body["model"] = self._model
        body["messages"] = item.messages
        if item.tools:
            body["tools"] = item.tools
        body["stream"] = req.stream
        if req.stream:
            body["stream_options"] = {"include_usage": True}
        raw = orjson.dumps(body)
        tool_choice = body.get("tool_choice")
        offered = {
            "tools": offered_tools(item.tools) if item.tools else None,
            "tool_choice": tool_choice,
            "expects_tool_call": bool(item.tools) and tool_choice != "none" and (
                item.expects_tool_call or forces_a_call(tool_choice)),
        }
        offered.update(request_profile(item.messages))
        if item.reasoning is not None:
            offered["reasoning"] = "on" if item.reasoning else "off"
        if item.tags:
            offered["tags"] = dict(item.tags)
        if item.expected is not None and item.expected.checkable and item.messages:
            offered["ask"] = _ask(item.messages[-1])
        if item.turn is not None:
            offered["turn"] = {"session": item.turn.session, "index": item.turn.index,
                               "count": item.turn.count, "think_s": item.turn.think_s}
        entry = Prepared(raw, hashlib.blake2b(raw, digest_size=8).hexdigest(), offered,
                         item.expected.to_dict() if item.expected is not None else None)
        if len(self._bodies) < BODY_CACHE_ITEMS:
            self._bodies[item.item_id] = entry
        return entry

    def record(self, phase: str, seq: int, item: WorkItem, endpoint: str,
               prepared: Prepared) -> RequestRecord:
        req = self._scenario.request
        return RequestRecord(
            run_id=self._run_id, scenario=self._scenario.name, phase=phase, seq=seq,
            endpoint=endpoint, item_id=item.item_id,
            params={"max_tokens": req.max_tokens, "temperature": req.temperature,
                    "top_p": req.top_p, "seed": req.seed, "stream": req.stream,
                    "approx_prompt_tokens": item.approx_prompt_tokens, **prepared.offered},
            body_hash=prepared.body_hash, greedy=req.temperature == 0.0, worker=self._worker,
            expected=prepared.expected,
        )
