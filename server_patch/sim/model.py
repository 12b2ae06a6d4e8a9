"""The toy model: a deterministic script, followed only while its reads are right.

Given a request, the model's healthy reply is fixed: some reasoning, the end of the
think block, then a short tool call (when tools are offered) or a short answer. Each
step the engine judges what the request's rows read through the C128A metadata
(`reads.py`). Missing context (unwritten or padded slots) costs the model nothing: its
sliding window and other layers still carry the request. Another request's KV does:
once more than `fatal_foreign_share` of what one of its rows read was foreign, the
model is lost. It repeats a sentence about the request and never closes the think
block, so the reply ends by length with empty content, exactly the #52448 signature.
Nothing random decides a failure: only what the model read.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

_TOKEN = re.compile(r"\w+|[^\w\s]")
_ACCOUNT = re.compile(r"\b[A-Z0-9]{6}\b")

_FILLER = (
    "Let me restate the request before acting.",
    "The instruction is explicit, so I should follow it in order.",
    "Nothing in the context contradicts this.",
    "I should not claim an action I did not perform.",
    "One step at a time is the safest way to do this.",
    "The tools offered are enough for the first step.",
    "I will keep the reply short and precise.",
    "Checking the details once more before answering.",
)


def count_tokens(text: str) -> int:
    """The sim's tokenizer: words and punctuation marks."""
    return len(_TOKEN.findall(text))


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """What the sim 'tokenizes' for a chat: every message's text, and the tools."""
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):  # OpenAI content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"{m.get('role', 'user')}: {content or ''}")
        for call in m.get("tool_calls") or []:
            parts.append(json.dumps(call.get("function", {})))
    if tools:
        parts.append(json.dumps(tools))
    return "\n".join(parts)


def _words(text: str) -> list[str]:
    return [w + " " for w in text.split()]


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""


def _pick_tool(tools: list[dict[str, Any]], request_words: set[str]) -> dict[str, Any]:
    """The tool whose name, description and enum values overlap the request most."""
    best, best_score = tools[0], -1
    for tool in tools:
        fn = tool.get("function") or {}
        text = f"{fn.get('name', '')} {fn.get('description', '')}".replace("_", " ").lower()
        for prop in ((fn.get("parameters") or {}).get("properties") or {}).values():
            text += " " + " ".join(str(v) for v in (prop.get("enum") or []))
        score = len(request_words & set(re.findall(r"\w+", text)))
        if score > best_score:
            best, best_score = tool, score
    return best


def _arguments(tool: dict[str, Any], request_text: str, request_words: set[str]) -> str:
    fn = tool.get("function") or {}
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    required = params.get("required") or list(props)
    account = _ACCOUNT.search(request_text)
    args: dict[str, Any] = {}
    for name in required:
        prop = props.get(name) or {}
        enum = prop.get("enum")
        if enum:
            args[name] = next((v for v in enum if str(v).lower() in request_words), enum[0])
        elif "id" in name and account:
            args[name] = account.group(0)
        elif prop.get("type") in ("integer", "number"):
            args[name] = 1
        else:
            args[name] = "as requested"
    return json.dumps(args)


@dataclass
class Script:
    """What a healthy reply says, piece by piece (one piece per generated token)."""

    reasoning: list[str]
    answer: list[str]
    tool_name: str | None
    tool_arguments: list[str]
    loop: list[str]


def make_script(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                seed: int = 0) -> Script:
    request = _last_user_text(messages)
    tail = " ".join(request.split()[-16:]) or "help"
    request_words = {w.lower() for w in re.findall(r"\w+", request)}
    digest = hashlib.blake2b(f"{seed}/{render_prompt(messages, tools)}".encode(),
                             digest_size=8).digest()
    fillers = [_FILLER[b % len(_FILLER)] for b in digest[:3]]
    reasoning = f"The user asks: {tail} {' '.join(fillers)}"
    loop = f"Wait, the user said: {tail} Let me read that again. "
    if tools:
        tool = _pick_tool(tools, request_words)
        name = (tool.get("function") or {}).get("name", "tool")
        args = _arguments(tool, request, request_words)
        reasoning += f" So I call {name} now."
        pieces = [args[i:i + 6] for i in range(0, len(args), 6)]
        return Script(_words(reasoning), [], name, pieces, _words(loop))
    answer = f"Done: {tail}"
    return Script(_words(reasoning), _words(answer), None, [], _words(loop))


@dataclass
class Piece:
    """One generated token, as the API streams it."""

    channel: str  # "reasoning", "content", "tool_name", "tool_args", "think_end"
    text: str


@dataclass
class Reply:
    """A request's generation state: where it is in its script, and whether it is lost."""

    script: Script
    max_tokens: int
    generated: int = 0
    reasoning_tokens: int = 0
    corrupted_at: int | None = None  # completion token index where a read derailed it
    _i: int = 0
    _phase: str = "reasoning"
    finish_reason: str | None = None
    pieces: list[Piece] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def in_reasoning(self) -> bool:
        return self._phase == "reasoning"

    @property
    def lost(self) -> bool:
        return self.corrupted_at is not None

    def lose(self) -> None:
        """A read derailed the model: from this token on it loops in its channel."""
        if self.corrupted_at is None:
            self.corrupted_at = self.generated

    def next_piece(self) -> Piece:
        """Generate one token; sets finish_reason when the reply ends."""
        piece = self._step()
        self.generated += 1
        if piece.channel in ("reasoning", "think_end"):
            self.reasoning_tokens += 1
        if not self.done and self.generated >= self.max_tokens:
            self.finish_reason = "length"
        return piece

    def _step(self) -> Piece:
        s = self.script
        if self.corrupted_at is not None:
            # Lost: loop on the request, in whichever channel the reply was in.
            text = s.loop[self._i % len(s.loop)]
            self._i += 1
            return Piece("reasoning" if self._phase == "reasoning" else "content", text)
        if self._phase == "reasoning":
            if self._i < len(s.reasoning):
                self._i += 1
                return Piece("reasoning", s.reasoning[self._i - 1])
            self._phase, self._i = ("tool" if s.tool_name else "answer"), 0
            return Piece("think_end", "</think>")
        if self._phase == "tool":
            if self._i == 0:
                self._i = 1
                return Piece("tool_name", s.tool_name or "")
            piece = Piece("tool_args", s.tool_arguments[self._i - 1])
            self._i += 1
            if self._i > len(s.tool_arguments):
                self.finish_reason = "tool_calls"
            return piece
        piece = Piece("content", s.answer[self._i])
        self._i += 1
        if self._i >= len(s.answer):
            self.finish_reason = "stop"
        return piece
