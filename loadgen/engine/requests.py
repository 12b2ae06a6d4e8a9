"""Request bodies and the records that will hold their replies.

The scenario's sampling settings fill what a work item leaves open; the keys the
engine must own to measure (model, stream, stream_options) are always its own. A
body is serialised once per item and its hash lets identical greedy requests be
compared after the run.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from loadgen.records import RequestRecord
from loadgen.scenario import Scenario
from loadgen.workload import WorkItem

BODY_CACHE_ITEMS = 512


class RequestMaker:
    def __init__(self, scenario: Scenario, run_id: str, model: str, worker: int = 0) -> None:
        self._scenario = scenario
        self._run_id = run_id
        self._model = model
        self._worker = worker
        self._bodies: dict[str, tuple[bytes, str]] = {}

    def body(self, item: WorkItem) -> tuple[bytes, str]:
        """(serialised body, its hash)."""
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
        if req.chat_template_kwargs:
            body["chat_template_kwargs"] = req.chat_template_kwargs
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
        entry = (raw, hashlib.blake2b(raw, digest_size=8).hexdigest())
        if len(self._bodies) < BODY_CACHE_ITEMS:
            self._bodies[item.item_id] = entry
        return entry

    def record(self, phase: str, seq: int, item: WorkItem, endpoint: str,
               body_hash: str) -> RequestRecord:
        req = self._scenario.request
        return RequestRecord(
            run_id=self._run_id, scenario=self._scenario.name, phase=phase, seq=seq,
            endpoint=endpoint, item_id=item.item_id,
            params={"max_tokens": req.max_tokens, "temperature": req.temperature,
                    "top_p": req.top_p, "seed": req.seed, "stream": req.stream,
                    "approx_prompt_tokens": item.approx_prompt_tokens},
            body_hash=body_hash, greedy=req.temperature == 0.0, worker=self._worker,
        )
