"""Reduce a server answer to its shape: the field names a client depends on.

Why: ids, timestamps and sampled text differ between runs; the names of fields, which
chunks exist (role, reasoning, content, finish, usage, [DONE]) and the finish reasons
do not, and those are what the loadgen's parser depends on. Comparing shapes lets a
live server check the recorded fixtures without flaking on values. Stdlib only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def key_paths(obj: Any, prefix: str = "") -> set[str]:
    """Every key path in a JSON value: {"a": [{"b": 1}]} -> {"a", "a[].b"}."""
    paths: set[str] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            paths |= key_paths(value, path)
    elif isinstance(obj, list):
        for item in obj:
            paths |= key_paths(item, f"{prefix}[]")
    return paths


def sse_data(raw: bytes) -> list[str]:
    """The `data:` payloads of a text/event-stream body, in order (one per event)."""
    payloads = []
    for event in raw.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        lines = [ln[5:].removeprefix(" ") for ln in event.split("\n") if ln.startswith("data:")]
        if lines:
            payloads.append("\n".join(lines))
    return payloads


@dataclass
class StreamShape:
    """What a streamed chat completion is made of, values left out."""

    paths: set[str] = field(default_factory=set)
    delta_keys: set[str] = field(default_factory=set)
    finish_reasons: set[str] = field(default_factory=set)
    ends_with_done: bool = False
    usage_chunk: bool = False
    usage_paths: set[str] = field(default_factory=set)
    reasoning: str = ""
    content: str = ""
    role_first: bool = False
    chunk_kinds: list[str] = field(default_factory=list)  # run-length: role, reasoning, ...

    def comparable(self) -> dict[str, Any]:
        """The parts that must match between a fixture and a live answer."""
        return {
            "paths": sorted(self.paths),
            "delta_keys": sorted(self.delta_keys),
            "finish_reasons": sorted(self.finish_reasons),
            "ends_with_done": self.ends_with_done,
            "usage_chunk": self.usage_chunk,
            "usage_paths": sorted(self.usage_paths),
            "role_first": self.role_first,
            "has_reasoning": bool(self.reasoning),
            "has_content": bool(self.content),
        }


def stream_shape(raw: bytes) -> StreamShape:
    shape = StreamShape()
    payloads = sse_data(raw)
    shape.ends_with_done = bool(payloads) and payloads[-1] == "[DONE]"
    for index, payload in enumerate(p for p in payloads if p != "[DONE]"):
        chunk = json.loads(payload)
        shape.paths |= key_paths(chunk)
        if chunk.get("usage"):
            shape.usage_chunk = True
            shape.usage_paths |= key_paths(chunk["usage"])
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            shape.delta_keys |= set(delta)
            if index == 0 and delta.get("role") == "assistant":
                shape.role_first = True
            kind = ("role" if "role" in delta else "reasoning" if delta.get("reasoning")
                    else "content" if delta.get("content") else "other")
            if not shape.chunk_kinds or shape.chunk_kinds[-1] != kind:
                shape.chunk_kinds.append(kind)
            shape.reasoning += delta.get("reasoning") or ""
            shape.content += delta.get("content") or ""
            if choice.get("finish_reason"):
                shape.finish_reasons.add(choice["finish_reason"])
    return shape


def prometheus_families(text: str) -> set[str]:
    """Metric family names declared by `# TYPE` lines."""
    return {ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE ")}


def answer_shape(kind: str, body: bytes) -> Any:
    """A comparable shape for one recorded or live answer of the given kind."""
    if kind == "sse":
        return stream_shape(body).comparable()
    if kind == "json":
        return sorted(key_paths(json.loads(body)))
    if kind == "prometheus":
        return sorted(f for f in prometheus_families(body.decode()) if f.startswith("vllm:"))
    return {"empty": not body.strip()}
