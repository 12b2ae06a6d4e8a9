"""The toy model: a deterministic script, followed while what its rows read is its own.

Given a request, the model's healthy reply is fixed: some reasoning, the end of the
think block, then a short tool call (when tools are offered) or a short answer. The
script follows the request's own facts (`facts.py`): the account it acts on is the first
code of the user's messages, the plan is the one the ask names (the last paragraph of
the last user message), and an answer states the request's codes.

Each step the engine judges what the request's rows read through the C128A metadata
(`reads.py`). Missing context (unwritten or padded slots) costs the model nothing: its
sliding window and other layers still carry the request. Another request's KV does, by
how much of a row it was (`faces.py`): salad for a stretch (spelled from the entries
read, `salad.py`), the other request's facts in what the reply has yet to write
(cross-talk), or, past `fatal_foreign_share`, lost: it repeats a sentence about the
request and never closes its channel, so the reply ends by length (the #52448
signature). Nothing random decides a reply: only what the model read.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from server_patch.sim.faces import Face
from server_patch.sim.facts import (
    Carried,
    carried_by,
    code_matches,
    message_text,
    replace_codes,
)
from server_patch.sim.salad import token_salad
from server_patch.sim.skills import FactRef, Solution, alter, solve

_TOKEN = re.compile(r"\w+|[^\w\s]")
_PARAGRAPH = re.compile(r"\n\s*\n")
#: Characters per tool-argument token (a code is always one token, whole).
_ARG_CHUNK = 6
#: What an answer calls a request's codes, in order; any further one is a reference.
_FACT_NAMES = ("account id", "contract number")

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


def tokenize(text: str) -> list[str]:
    """The sim's tokenizer: words and punctuation marks."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _reasoning_of(message: dict[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """What the sim 'tokenizes' for a chat, laid out as DeepSeek-V4's template lays it
    out: the system messages, the tools, then the conversation. An assistant message's
    reasoning is kept only after the last user message (the template's `drop_thinking`):
    inside a tool loop the prompt grows by appending, and a new user turn rewrites it
    from the previous user message on, which is what a prefix cache sees."""
    lead = 0
    while lead < len(messages) and messages[lead].get("role") == "system":
        lead += 1
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"),
                    default=-1)
    parts = [f"system: {message_text(m)}" for m in messages[:lead]]
    if tools:
        parts.append(json.dumps(tools))
    for i, m in enumerate(messages[lead:], lead):
        role = m.get("role", "user")
        reasoning = _reasoning_of(m) if role == "assistant" and i > last_user else ""
        thought = f"<think>{reasoning}</think> " if reasoning else ""
        parts.append(f"{role}: {thought}{message_text(m)}")
        for call in m.get("tool_calls") or []:
            parts.append(json.dumps(call.get("function", {})))
    return "\n".join(parts)


def _content(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """What the script's choices hash (its reasoning's filler sentences): every message's
    text and calls, then the tools. Not the rendered prompt, whose layout follows the
    template: the same request keeps the same reasoning whatever the layout."""
    parts = []
    for m in messages:
        parts.append(f"{m.get('role', 'user')}: {message_text(m)}")
        parts += [json.dumps(call.get("function", {})) for call in m.get("tool_calls") or []]
    if tools:
        parts.append(json.dumps(tools))
    return "\n".join(parts)


def _words(text: str) -> list[str]:
    return [w + " " for w in text.split()]


def ask_of(messages: list[dict[str, Any]]) -> str:
    """What the request asks: the last paragraph of the last user message (a long
    document's question comes after it)."""
    for m in reversed(messages):
        if m.get("role") == "user":
            paragraphs = [p.strip() for p in _PARAGRAPH.split(message_text(m)) if p.strip()]
            return paragraphs[-1] if paragraphs else ""
    return ""


def _pick_tool(tools: list[dict[str, Any]], ask_words: set[str]) -> dict[str, Any]:
    """The tool whose name, description and enum values overlap the ask most."""
    best, best_score = tools[0], -1
    for tool in tools:
        fn = tool.get("function") or {}
        text = f"{fn.get('name', '')} {fn.get('description', '')}".replace("_", " ").lower()
        for prop in ((fn.get("parameters") or {}).get("properties") or {}).values():
            text += " " + " ".join(str(v) for v in (prop.get("enum") or []))
        score = len(ask_words & set(re.findall(r"\w+", text)))
        if score > best_score:
            best, best_score = tool, score
    return best


def _arguments(tool: dict[str, Any], account: str | None, ask_words: set[str]) -> str:
    fn = tool.get("function") or {}
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    required = params.get("required") or list(props)
    args: dict[str, Any] = {}
    for name in required:
        prop = props.get(name) or {}
        enum = prop.get("enum")
        if enum:
            args[name] = next((v for v in enum if str(v).lower() in ask_words), enum[0])
        elif "id" in name and account:
            args[name] = account
        elif prop.get("type") in ("integer", "number"):
            args[name] = 1
        else:
            args[name] = "as requested"
    return json.dumps(args)


def _argument_tokens(args: str) -> list[str]:
    """Tool arguments cut into tokens of a few characters, each code one whole token."""
    tokens: list[str] = []
    pos = 0
    for m in [*code_matches(args), None]:
        end = m.start() if m else len(args)
        tokens += [args[i:min(i + _ARG_CHUNK, end)] for i in range(pos, end, _ARG_CHUNK)]
        if m:
            tokens.append(m.group(0))
            pos = m.end()
    return tokens


def _statement(facts: tuple[str, ...]) -> str:
    """An answer's statement of the request's codes ("" without any)."""
    if not facts:
        return ""
    named = [f"the {_FACT_NAMES[i] if i < len(_FACT_NAMES) else 'reference'} is {code}"
             for i, code in enumerate(facts)]
    return " and ".join(named) + ". "


def _pieces(text: str) -> list[str]:
    """An answer's tokens, each word with the whitespace after it (line breaks kept)."""
    return re.findall(r"\S+\s*", text)


@dataclass
class Script:
    """What a healthy reply says, piece by piece (one piece per generated token), and
    what the request carries (what another reply that reads its KV may write).

    A solved request (`skills.solve`) also knows the values its answer copies
    (`facts`, each with its token position in the prompt) and how the answer follows
    from them (`render`): a value read wrong changes the answer from there on."""

    reasoning: list[str]
    answer: list[str]
    tool_name: str | None
    tool_arguments: list[str]
    loop: list[str]
    carried: Carried = field(default_factory=Carried)
    facts: tuple[FactRef, ...] = ()
    positions: tuple[int, ...] = ()  # each fact's token position in the prompt
    render: Callable[[tuple[str, ...]], str] | None = None


def _solved(solution: Solution, rendered: str, reasoning: str, loop: list[str],
            carried: Carried) -> Script:
    positions = tuple(count_tokens(rendered[:f.offset]) for f in solution.facts)
    text = solution.answer()
    if solution.tool:
        return Script(_words(f"{reasoning} So I call {solution.tool} now."), [],
                      solution.tool, _argument_tokens(text), loop, carried,
                      solution.facts, positions, solution.render)
    return Script(_words(reasoning), _pieces(text), None, [], loop, carried,
                  solution.facts, positions, solution.render)


def make_script(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                seed: int = 0, thinking: bool = True) -> Script:
    """The healthy reply to a chat; without `thinking` (the chat template's switch off)
    it answers straight away, with no reasoning."""
    script = _make_script(messages, tools, seed)
    if not thinking:
        script.reasoning = []
    return script


def _make_script(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 seed: int) -> Script:
    carried = carried_by(messages)
    ask = ask_of(messages)
    tail = " ".join(ask.split()[-16:]) or "help"
    ask_words = {w.lower() for w in re.findall(r"\w+", ask)}
    digest = hashlib.blake2b(f"{seed}/{_content(messages, tools)}".encode(),
                             digest_size=8).digest()
    fillers = [_FILLER[b % len(_FILLER)] for b in digest[:3]]
    reasoning = f"The user asks: {tail} {' '.join(fillers)}"
    loop = f"Wait, the user said: {tail} Let me read that again. "
    rendered = render_prompt(messages, tools)
    solution = solve(messages, rendered, message_text(messages[-1]) if messages else "")
    if solution is not None:
        return _solved(solution, rendered, f"{solution.reasoning} {' '.join(fillers)}",
                       _words(loop), carried)
    if tools:
        tool = _pick_tool(tools, ask_words)
        name = (tool.get("function") or {}).get("name", "tool")
        account = carried.facts[0] if carried.facts else None
        args = _arguments(tool, account, ask_words)
        reasoning += f" So I call {name} now."
        return Script(_words(reasoning), [], name, _argument_tokens(args), _words(loop),
                      carried)
    answer = f"Done: {_statement(carried.facts)}{tail}"
    return Script(_words(reasoning), _words(answer), None, [], _words(loop), carried)


@dataclass
class Piece:
    """One generated token, as the API streams it."""

    channel: str  # "reasoning", "content", "tool_name", "tool_args", "think_end"
    text: str


@dataclass
class Reply:
    """A request's generation state: where it is in its script, and what foreign reads
    did to it (`faces`, in the order taken; see `faces.py`)."""

    script: Script
    max_tokens: int
    generated: int = 0
    reasoning_tokens: int = 0
    corrupted_at: int | None = None  # completion token index where a read derailed it
    faces: list[Face] = field(default_factory=list)
    finish_reason: str | None = None
    _i: int = 0
    _phase: str = "reasoning"
    _salad: deque[str] = field(default_factory=deque)  # salad tokens yet to write
    _swap: dict[str, str] = field(default_factory=dict)  # own code -> the one written
    #: The facts' values as the model read them (a solved script's), and which of them
    #: it read wrong: fact index -> what the read found instead.
    values: list[str] = field(default_factory=list)
    misread: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = [f.value for f in self.script.facts]
        if not self.script.reasoning:  # reasoning off: the answer comes first
            self._phase = "tool" if self.script.tool_name else "answer"

    def misread_fact(self, index: int, found: int) -> bool:
        """A read of the entry that holds fact `index` did not return it (`found`: what
        it returned instead, or which entry the indexer took): the model copies the
        value altered from here on, if it has not written it yet. True when the reply
        changed."""
        s = self.script
        if self.done or index in self.misread or s.render is None:
            return False
        self.misread[index] = found
        fact = s.facts[index]
        values = list(self.values)
        values[index] = alter(fact.value, fact.kind, found)
        new = s.render(tuple(values))
        if s.tool_name:
            done = max(self._i - 1, 0) if self._phase == "tool" else 0
            pieces = s.tool_arguments
        else:
            done = self._i if self._phase == "answer" else 0
            pieces = s.answer
        written = "".join(pieces[:done])
        if not new.startswith(written):  # the value is written already: too late
            return False
        self.values = values
        rest = new[len(written):]
        if s.tool_name:
            s.tool_arguments = pieces[:done] + _argument_tokens(rest)
            return True
        s.answer = s.answer[:done] + _pieces(new[len(written):])
        return True

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def lost(self) -> bool:
        return self.corrupted_at is not None

    @property
    def face(self) -> Face:
        """The most severe face a read gave this reply so far."""
        return max(self.faces, default=Face.NONE)

    def take(self, face: Face, foreign: Carried, owner: int, entries: int) -> bool:
        """A row read `entries` entries of request `owner` (which carries `foreign`) and
        that gives `face`: act on it unless the reply already took a face as severe.
        True when the reply took it (what it writes from here on changed)."""
        if self.done or face <= self.face:
            return False
        if face is Face.LOST:
            self.lose()
        elif face is Face.CROSS_TALK:
            swap = {own: theirs for own, theirs in
                    zip(self.script.carried.facts, foreign.facts, strict=False) if own != theirs}
            if not any(replace_codes(text, swap) != text for text in self._yet_to_write()):
                return False  # nothing it has yet to write names a fact of its own
            self._swap = swap
        elif face is Face.SALAD:
            self._salad.extend(token_salad(owner, entries, foreign.words))
        else:
            return False
        self.faces.append(face)
        return True

    def lose(self) -> None:
        """A read derailed the model: from this token on it loops in its channel."""
        if self.corrupted_at is None:
            self.corrupted_at = self.generated
            self._salad.clear()

    def _yet_to_write(self) -> list[str]:
        s = self.script
        after = s.tool_arguments if s.tool_name else s.answer
        if self._phase == "reasoning":
            return s.reasoning[self._i:] + after
        if self._phase == "tool":
            return s.tool_arguments[max(self._i - 1, 0):]
        return s.answer[self._i:]

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
        channel = "reasoning" if self._phase == "reasoning" else "content"
        if self.corrupted_at is not None:
            # Lost: loop on the request, in whichever channel the reply was in.
            text = s.loop[self._i % len(s.loop)]
            self._i += 1
            return Piece(channel, replace_codes(text, self._swap))
        if self._salad:
            return Piece(channel, self._salad.popleft())
        if self._phase == "reasoning":
            if self._i < len(s.reasoning):
                self._i += 1
                return Piece("reasoning", replace_codes(s.reasoning[self._i - 1], self._swap))
            self._phase, self._i = ("tool" if s.tool_name else "answer"), 0
            return Piece("think_end", "</think>")
        if self._phase == "tool":
            if self._i == 0:
                self._i = 1
                return Piece("tool_name", s.tool_name or "")
            piece = Piece("tool_args", replace_codes(s.tool_arguments[self._i - 1], self._swap))
            self._i += 1
            if self._i > len(s.tool_arguments):
                self.finish_reason = "tool_calls"
            return piece
        piece = Piece("content", replace_codes(s.answer[self._i], self._swap))
        self._i += 1
        if self._i >= len(s.answer):
            self.finish_reason = "stop"
        return piece

