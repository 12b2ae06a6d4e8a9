"""Request bodies and the records that will hold their replies.

The scenario's sampling settings fill what a work item leaves open; the keys the
engine must own to measure (model, stream, stream_options) are always its own. A
body is serialised once per item and its hash lets identical greedy requests be
compared after the run. How a reply is sampled (greedy or not, its max_tokens) is read
from the body that is sent, never from the scenario: a replayed body says its own.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import orjson

from loadgen.judge.reply.request_profile import request_profile
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
    #: How the reply is sampled, as the body sent says it (`sampling`).
    sampling: dict[str, Any]


#: The body's keys that say how a reply is sampled, in a record's params.
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "seed", "n")


def sampling(body: dict[str, Any]) -> dict[str, Any]:
    """How this request's reply is sampled, from the body that is sent (a replayed or
    scripted body overrides the scenario's settings, so the scenario cannot say it):
    the keys the body sets, and max_tokens (or max_completion_tokens)."""
    found = {key: body[key] for key in SAMPLING_KEYS if body.get(key) is not None}
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    found["max_tokens"] = limit
    found.setdefault("temperature", None)
    return found


def is_greedy(found: dict[str, Any]) -> bool:
    """Greedy decoding: temperature 0, or top_k 1. A body that leaves temperature out
    is sampled at the server's default (the model's generation config), never assumed
    greedy."""
    temperature, top_k = found.get("temperature"), found.get("top_k")
    numeric = isinstance(temperature, int | float) and not isinstance(temperature, bool)
    return (numeric and temperature == 0) or top_k == 1


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
                         item.expected.to_dict() if item.expected is not None else None,
                         sampling(body))
        if len(self._bodies) < BODY_CACHE_ITEMS:
            self._bodies[item.item_id] = entry
        return entry

    def record(self, phase: str, seq: int, item: WorkItem, endpoint: str,
               prepared: Prepared) -> RequestRecord:
        req = self._scenario.request
        return RequestRecord(
            run_id=self._run_id, scenario=self._scenario.name, phase=phase, seq=seq,
            endpoint=endpoint, item_id=item.item_id,
            params={"top_p": None, "seed": None, **prepared.sampling, "stream": req.stream,
                    "approx_prompt_tokens": item.approx_prompt_tokens, **prepared.offered},
            body_hash=prepared.body_hash, greedy=is_greedy(prepared.sampling),
            worker=self._worker,
            expected=prepared.expected,
        )
