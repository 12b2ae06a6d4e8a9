"""Tool turns judged as tool turns: `no_tool_call`, `bad_tool_call`, `tool_args_loop`.

- no_tool_call: a turn that expected a tool call (the record's `params`: the workload
  says so, or `tool_choice` is "required" or names a function) got none.
- bad_tool_call: a tool call whose name is empty or not among the tools offered, or
  whose arguments are not a JSON object or miss a key the tool's schema requires.
- tool_args_loop: a string value in a tool call's arguments loops (a `reason` or an
  email `body` that restates one sentence: `loops`), or the arguments are cut by
  `length` before they close (and, when they loop there, say so). A value repeated in
  the arguments is not a loop by itself: an array of one value, identical objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from loadgen import fields
from loadgen.judge.reply.family import Family, Found
from loadgen.judge.reply.loops import LoopKnobs, text_loop
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict


def tool_call_problems(record: RequestRecord, cfg: LoopKnobs
                       ) -> tuple[set[Verdict], list[str]]:
    """The tool-turn verdicts of a record and, for the forensics, why each was given."""
    found: set[Verdict] = set()
    why: list[str] = []
    params = record.params
    offered = params.get("tools")  # name -> required keys; None: not known
    calls = record.tool_calls
    if params.get("expects_tool_call") and not calls:
        found.add(Verdict.NO_TOOL_CALL)
        why.append("a tool call was expected; the reply has none")
    cut = record.finish_reason == "length"
    for i, call in enumerate(calls):
        fn = fields.section(call, "function")
        name = fn.get("name") or ""
        raw = fn.get("arguments") or ""
        try:
            args = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            args = None
        cut_here = args is None and cut and i == len(calls) - 1
        loop = _arguments_loop(raw, args, cfg, cut_here)
        if loop is not None:
            found.add(Verdict.TOOL_ARGS_LOOP)
            why.append(f"call {i} ({name or '?'}): {loop}")
        if cut_here:
            found.add(Verdict.TOOL_ARGS_LOOP)
            why.append(f"call {i} ({name or '?'}): arguments cut by length before they close")
            continue
        if not name:
            problem = "no function name"
        elif isinstance(offered, dict) and name not in offered:
            problem = f"function {name!r} was not offered ({', '.join(sorted(offered)) or 'none'})"
        elif not isinstance(args, dict):
            problem = f"arguments are not a JSON object: {raw[:120]!r}"
        else:
            required = (offered or {}).get(name) or []
            missing = [key for key in required if key not in args]
            problem = f"arguments miss required {', '.join(missing)}" if missing else ""
        if problem:
            found.add(Verdict.BAD_TOOL_CALL)
            why.append(f"call {i} ({name or '?'}): {problem}")
    twice = _reused_ids(calls)
    if twice:
        # The client answers each call by its id: two calls of one id cannot both be.
        found.add(Verdict.BAD_TOOL_CALL)
        why += twice
    return found, why


#: A random part of a tool-call id: at least this many letters and digits, both in it.
MIN_RANDOM_CHARS = 9
_RANDOM_RUN = re.compile(rf"[A-Za-z0-9]{{{MIN_RANDOM_CHARS},}}")


def random_part(call_id: str, name: str) -> bool:
    """Whether a tool-call id holds a part made up at random, the function's name taken
    out: what a server writes to tell its calls apart (vLLM's `chatcmpl-tool-` and a
    random hex, OpenAI's `call_` and 24 characters, Mistral's 9). An id a parser writes
    from the name and the position (`functions.get_weather:0`) or a fixed one (`t`) has
    none, and says nothing when it is seen again."""
    rest = call_id.replace(name, " ") if name else call_id
    return any(any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
               for run in _RANDOM_RUN.findall(rest))


def _reused_ids(calls: list[dict[str, Any]]) -> list[str]:
    """One sentence per random id that two calls of one reply both carry."""
    first: dict[str, int] = {}
    out: list[str] = []
    for i, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call, dict) else None
        name = fields.section(call, "function").get("name") or ""
        if not isinstance(call_id, str) or not random_part(call_id, str(name)):
            continue
        if call_id in first:
            out.append(f"call {i}: id {call_id!r} is call {first[call_id]}'s too")
        else:
            first[call_id] = i
    return out




def _strings(value: Any) -> Iterator[str]:
    """Every string value in parsed arguments (not the keys: a loop is in what is said)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _arguments_loop(raw: str, args: Any, cfg: LoopKnobs, cut: bool) -> str | None:
    """Why the arguments loop, or None.

    Parsed arguments are judged value by value, each string as finished text: repeated
    values and identical objects are data, a string that restates itself is a loop.
    Arguments that do not parse are judged as the raw text they are, cut or not.
    """
    if args is None:
        hit = text_loop(raw, cfg, cut=cut, min_novelty=cfg.template_min_novelty)
        return f"arguments end in a loop of {hit[1]!r} x{hit[2]}" if hit else None
    for text in _strings(args):
        hit = text_loop(text, cfg, cut=False, min_novelty=cfg.template_min_novelty)
        if hit:
            return f"an argument value loops: {hit[1]!r} x{hit[2]}"
    return None


def _check(record: RequestRecord, cfg: LoopKnobs) -> Found | None:
    verdicts, why = tool_call_problems(record, cfg)
    if not (verdicts or why):
        return None
    return Found(frozenset(verdicts), {"tool_calls": why} if why else {})


def _describe(found: Mapping[str, Any]) -> list[str]:
    return [f"tool call: {problem}" for problem in found["tool_calls"]]


#: Reads the loop family's knobs for a looping argument (`loops.LoopKnobs`).
FAMILY = Family(
    name="tool_calls",
    verdicts=frozenset({Verdict.NO_TOOL_CALL, Verdict.BAD_TOOL_CALL, Verdict.TOOL_ARGS_LOOP}),
    findings={"tool_calls": list[str]}, describe=_describe, check=_check)
