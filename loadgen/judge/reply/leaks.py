"""`token_leak`: the model's own markup that reached the visible text.

Markup is special tokens (`<|...|>`, `<｜...｜>`: BOS, EOS, chat-template tokens), think
tags and tool-call markup (`<tool_call>`, `<function_calls>`, DSML elements). An answer
about chat templates or tokenizers writes them too, so where a match stands decides:

- talked about, never a leak: in inline code or a code block, or in quotes;
- leaked: in a run of markup (a BOS burst, `</think><|im_end|>`), glued to a word (a
  decoder writes control tokens against the text around them: `now</think>`,
  `<｜begin▁of▁sentence｜>wants`), or tool-call markup with its structure (a DSML invoke
  with its name, `<tool_call>{"name": ...`);
- talked about: named as what it is in the same line (`the <think> tag`, `the BOS token
  <｜begin▁of▁sentence｜>`, `between <think> and </think> tags`);
- leaked: at the very start or end of the text (`<｜begin▁of▁sentence｜>Done.`,
  `Upgrading now.</think>`);
- talked about: inside a sentence, a word among words (`it closes with </think> and
  then answers`), or what its line (a list item, a table row) goes on about
  (`<|im_end|> marks the end of a message`);
- leaked otherwise: e.g. a `</think>` that closes a sentence's worth of reasoning at the
  start of the content.

Those rules of where a match stands apply to replies whose request is about markup
(chat templates, tokenizers, special tokens, tags; or that holds markup itself: the
request's `about_markup`, worked out once per body). An answer about anything else has
no reason to write a special token: there, markup anywhere outside code is a leak,
whatever its neighbours ("... let me know. A <｜begin▁of▁sentence｜> few notes ..." of a
billing answer). Besides each model's own tokens, a catalogue of other chat templates'
markers is looked for (`</s>`, `<unk>`, `<end_of_turn>`, `[INST]`, `<</SYS>>`, ...): a
server may serve a model whose tokenizer the judge has never seen.

Invented turns: a role line written as text after the answer ("User: thanks!",
"Assistant:") is the model writing the conversation's next turn itself, unless the
request asks for a dialogue or writes such lines itself (`asks_dialogue`).

Plain tool-call tags are looked for in the content only (a reasoning may draft a call);
DSML elements, made of special tokens, in the reasoning too. Any
token the scenario names (`special_tokens`) is a leak wherever it appears. Every special
token the served model's tokenizer files declare (`verdicts.tokenizer`,
`loadgen.tokenizer_files`) that the catalogue does not already find is looked for too:
outside code in an answer not about markup, where it is not talked about in one that is.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from pydantic import Field, PrivateAttr, model_validator

from loadgen.judge.reply.family import Family, Found, Knobs
from loadgen.judge.text.visible import is_blank
from loadgen.records import RequestRecord
from loadgen.taxonomy import Verdict
from loadgen.tokenizer_files import special_tokens

# One "<" in front of every branch: the engine then looks for "<" at C speed instead of
# trying each branch at every position of a 64 KB text.

class LeakKnobs(Knobs):
    """The leak family's knobs: the special tokens of the served model."""

    special_tokens: list[str] = Field(default_factory=list)
    tokenizer: str | None = Field(
        default=None,
        description="The served model's tokenizer files (its directory, tokenizer.json "
        "or tokenizer_config.json): every special token they declare is a token_leak in "
        "an answer that is not about markup (outside code), and where it is not talked "
        "about in one that is. Read when the scenario is loaded.")
    _served_tokens: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _read_tokenizer(self) -> Self:
        if self.tokenizer:
            self._served_tokens = special_tokens(self.tokenizer)
        return self

    @property
    def served_tokens(self) -> tuple[str, ...]:
        """The special tokens `tokenizer` declares, with those the server declared (longest
        first)."""
        return self._served_tokens

    def add_served_tokens(self, tokens: tuple[str, ...] | list[str]) -> None:
        """The server's own declared tokens, read before the first request
        (targets.tokenizer_info), judged as the files' are."""
        found = set(self._served_tokens) | {t for t in tokens if t}
        self._served_tokens = tuple(sorted(found, key=lambda t: (-len(t), t)))


_MARKUP = re.compile(
    r"<(?:(?P<dsml>/?｜DSML｜[A-Za-z_]+(?:\s[^<>\n]{0,200})?>)"
    r"|(?P<special>\|[A-Za-z0-9_▁:.\-]{1,48}\|>|｜[^｜\n]{1,48}｜>?"
    # Other templates' markers: Llama/Mistral's BOS and EOS, SentencePiece's unknown and
    # padding, Gemma's turns, Llama 2's system block.
    r"|/?s>|unk>|pad>|/?eos>|/?bos>|start_of_turn>|end_of_turn>|</?SYS>>)"
    r"|(?P<tool>/?(?:tool_calls?|function_calls?)>|\|tool_calls?)"
    r"|(?P<think>/?think>))"
)
#: Mistral's and Llama 2's instruction brackets (no "<" to start with, so apart).
_BRACKETS = re.compile(r"\[/?INST\]")
_ROLES = r"(?:User|Human|Assistant|System|用户|助手)"
#: "User: ...", "**User:** ...", or a heading of its own ("### User").
_ROLE_LINE = re.compile(
    rf"^[ \t]*(?:#{{1,4}}[ \t]*{_ROLES}[ \t]*[:：]?[ \t]*$"
    rf"|(?:#{{1,4}}[ \t]*|\*\*)?{_ROLES}(?:\*\*)?[ \t]*[:：])", re.M)
#: Words of a request about markup: templates, tokenizers, tokens, tags.
_MARKUP_TOPIC = re.compile(
    r"(?i)\b(?:templates?|tokeni[sz]ers?|tokens?|tags?|markup|bos|eos|chatml|jinja|xml|"
    r"html|sgml|delimiters?|stop (?:sequences?|strings?)|prompt format|chat format|"
    r"special characters?)\b|模板|分词|词元|令牌|标签|标记|テンプレート|トークン|タグ")
#: Words of a request that asks for a dialogue written out.
_DIALOGUE_TOPIC = re.compile(
    r"(?i)\b(?:dialogues?|dialogs?|conversations?|transcripts?|scripts?|role-?plays?|"
    r"chat logs?|interviews?|exchanges?|screenplays?)\b|对话|会話|台本")
_TOOL_STRUCTURE = re.compile(
    r"""\s*(?:\{\s*"(?:name|arguments|function)"|</?｜DSML｜|<(?:invoke|parameter|function)\b)""")
_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
_INLINE = re.compile(r"(`+)(?!`)[^\n]+?(?<!`)\1(?!`)")
_NAMING = frozenset(
    "tag tags token tokens marker markers delimiter delimiters string strings sequence "
    "sequences symbol symbols element elements block blocks markup bos eos special "
    "literal".split())
_CJK_NAMING = ("标签", "标记", "令牌", "符号", "词元", "特殊")
_PAIRED_QUOTES = {"“": "”", "‘": "’", "«": "»", "「": "」", "『": "』", "(": ")"}
_SENTENCE_END = ".!?。！？"
# What may stand before markup that a line is about: nothing, or a list or table marker.
_ITEM = re.compile(r"[ \t]*(?:(?:[-*+•]|[0-9]{1,3}[.)]|\|)[ \t]+)?")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class _Match:
    start: int
    end: int
    kind: str  # "dsml", "tool", "special" or "think"


def _code_spans(text: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in _FENCED.finditer(text)]
    spans += [m.span() for m in _INLINE.finditer(text)
              if not any(a <= m.start() < b for a, b in spans)]
    return sorted(spans)


def _inside(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    i = bisect.bisect_right(spans, (start, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= start and end <= spans[i][1]


def _quoted(text: str, start: int, end: int, line: tuple[int, int]) -> bool:
    """In quotes: "<think>", '</think>', “<|im_end|>”, or inside a quoted phrase."""
    before = text[line[0]:start]
    after = text[end:line[1]]
    if before[-1:] in ("'", '"') and after[:1] == before[-1:]:
        return True
    if before.count('"') % 2 == 1 and '"' in after:
        return True
    return any(before.rfind(o) > before.rfind(c) and c in after
               for o, c in _PAIRED_QUOTES.items() if o != "(")


def _glued(text: str, start: int, end: int) -> bool:
    """A letter or digit of a space-separated script right against the markup."""
    for ch in (text[start - 1:start], text[end:end + 1]):
        if ch and ch.isalnum() and not _is_cjk(ch):
            return True
    return False


def _is_cjk(ch: str) -> bool:
    return "\u3040" <= ch <= "\u30ff" or "\u3400" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af"


def _named(text: str, start: int, end: int, line: tuple[int, int]) -> bool:
    """Named as what it is within three words on its line ("the </think> tag")."""
    before = _WORD.findall(text[max(line[0], start - 60):start])[-3:]
    after = _WORD.findall(text[end:min(line[1], end + 60)])[:3]
    if any(w.lower() in _NAMING for w in before + after):
        return True
    near = text[max(line[0], start - 6):start] + text[end:min(line[1], end + 6)]
    return any(word in near for word in _CJK_NAMING)


def _in_sentence(text: str, start: int, end: int, line: tuple[int, int]) -> bool:
    """A word among words: a word before it on its line (not a sentence's end) and,
    after it, a lower-case word or punctuation that goes on with the sentence; or the
    subject of its line, alone or after a list or table marker, with the line going on
    about it ("<|im_end|> marks the end", "- <|im_start|>: opens a message")."""
    before = text[line[0]:start]
    after = text[end:line[1]]
    nxt = after.lstrip(" \t")[:1]
    if not nxt:
        return False
    if _ITEM.fullmatch(before):
        return nxt in ":|-–—=," or (after[:1] in (" ", "\t") and nxt.islower())
    if not (before[-1].isspace() or before[-1] == "("):
        return False
    last = before.rstrip(" \t(")[-1:]
    if not last or last in _SENTENCE_END or not _WORD.search(before):
        return False
    if nxt in ".,;:!?)]":
        return True
    return after[:1] in (" ", "\t") and (nxt.islower() or nxt.isdigit() or nxt == "<")


def _line(text: str, start: int, end: int) -> tuple[int, int]:
    stop = text.find("\n", end)
    return text.rfind("\n", 0, start) + 1, len(text) if stop < 0 else stop


def _leaked(text: str, found: list[_Match], i: int, code: list[tuple[int, int]]) -> bool:
    m = found[i]
    s, e = m.start, m.end
    if _inside(code, s, e):
        return False
    line = _line(text, s, e)
    if _quoted(text, s, e, line):
        return False
    in_run = (i > 0 and is_blank(text, found[i - 1].end, s)) or \
        (i + 1 < len(found) and is_blank(text, e, found[i + 1].start))
    if in_run or _glued(text, s, e):
        return True
    if m.kind in ("dsml", "tool") and ('name="' in text[s:e] or _TOOL_STRUCTURE.match(text, e)):
        return True
    if _named(text, s, e, line):
        return False
    if is_blank(text, 0, s) or is_blank(text, e):
        return True
    return not _in_sentence(text, s, e, line)


def code_spans(text: str) -> list[tuple[int, int]]:
    """Where the text's inline code and code blocks are (`talked_about` takes them)."""
    return _code_spans(text) if "`" in text or "~~~" in text else []


def talked_about(text: str, start: int, end: int,
                 code: list[tuple[int, int]] | None = None) -> bool:
    """Markup at text[start:end] stands as a word among words, the way a text about chat
    templates writes it (in code or quotes, named as what it is, inside a sentence), and
    not as a decoder writes it (glued to a word, or against other markup). `code`: the
    text's `code_spans`, when the caller asks about several places of one text."""
    code = code_spans(text) if code is None else code
    if _inside(code, start, end):
        return True
    line = _line(text, start, end)
    if _quoted(text, start, end, line):
        return True
    if _glued(text, start, end):
        return False
    before, after = text[:start].rstrip(), text[end:].lstrip()
    if before.endswith(">") or after.startswith("<"):
        return False
    return _named(text, start, end, line) or _in_sentence(text, start, end, line)


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    return [c for m in messages if isinstance(c := m.get("content"), str)]


def asks_about_markup(messages: list[dict[str, Any]]) -> bool:
    """The request is about markup (templates, tokenizers, tokens, tags) or holds some:
    its reply may write markup as a word among words."""
    return any(_MARKUP_TOPIC.search(t) or _MARKUP.search(t) or _BRACKETS.search(t)
               for t in _texts(messages))


def asks_dialogue(messages: list[dict[str, Any]]) -> bool:
    """The request asks for a dialogue written out, or writes role lines itself."""
    return any(_DIALOGUE_TOPIC.search(t) or _ROLE_LINE.search(t) for t in _texts(messages))


def markup_leak(text: str, kinds: frozenset[str], *, about_markup: bool = True) -> str | None:
    """The first markup of these kinds that leaked into the text, or None. A text whose
    request is not `about_markup` has no reason for markup: any outside code leaked."""
    found = [_Match(m.start(), m.end(), m.lastgroup or "")
             for m in _MARKUP.finditer(text) if m.lastgroup in kinds]
    if "INST]" in text and "special" in kinds:
        found = sorted(found + [_Match(m.start(), m.end(), "special")
                                for m in _BRACKETS.finditer(text)], key=lambda m: m.start)
    if not found:
        return None
    code = _code_spans(text) if "`" in text or "~~~" in text else []
    for i, m in enumerate(found):
        if not about_markup and not _inside(code, m.start, m.end):
            return text[m.start:m.end]
        if _leaked(text, found, i, code):
            return text[m.start:m.end]
    return None


def invented_turn(text: str) -> str | None:
    """A role line written after the answer ("User: thanks"), or None."""
    for m in _ROLE_LINE.finditer(text):
        if not is_blank(text, 0, m.start()):
            return m.group(0).strip()
    return None


_CONTENT_KINDS = frozenset({"dsml", "tool", "special", "think"})
_REASONING_KINDS = frozenset({"dsml", "special", "think"})  # DSML is special tokens too


def find_leak(record: RequestRecord, cfg: LeakKnobs) -> str | None:
    """The first leaked token or tag (or invented turn), as the report shows it, or None.
    A record that does not say what its request was about (written before the judge
    asked) is judged by where its markup stands alone."""
    params = record.params or {}
    about = params.get("about_markup") is not False
    content = record.content
    if content:
        leaked = markup_leak(content, _CONTENT_KINDS, about_markup=about)
        if leaked:
            return f"content: {leaked!r}"
        if params.get("asks_dialogue") is False and (turn := invented_turn(content)):
            return f"content: an invented turn {turn!r}"
    reasoning = record.reasoning
    if reasoning:
        leaked = markup_leak(reasoning, _REASONING_KINDS, about_markup=about)
        if leaked:
            return f"reasoning: {leaked!r}"
    for token in cfg.special_tokens:
        if token and (token in content or token in reasoning):
            return f"special token {token!r}"
    served = _uncatalogued(cfg.served_tokens)
    if served is not None:
        for where, text in (("content", content), ("reasoning", reasoning)):
            leaked = served_leak(text, served, about_markup=about)
            if leaked:
                return f"{where}: the tokenizer's special token {leaked!r}"
    return None


@functools.cache
def _uncatalogued(tokens: tuple[str, ...]) -> re.Pattern[str] | None:
    """The tokenizer's special tokens that the markup rules above do not already find
    (theirs keep their own rules: think tags, tool tags, `<|...|>`), as one pattern
    (longest first), compiled once per tokenizer."""
    left = [t for t in tokens if not _MARKUP.fullmatch(t) and not _BRACKETS.fullmatch(t)]
    return re.compile("|".join(map(re.escape, left))) if left else None


def served_leak(text: str, tokens: re.Pattern[str], *, about_markup: bool) -> str | None:
    """The first of the tokenizer's own special tokens leaked into the text: anywhere
    outside code in an answer not about markup; where it is not talked about (in code,
    quotes, named, a word among words) in one that is."""
    if not text:
        return None
    code: list[tuple[int, int]] | None = None
    for m in tokens.finditer(text):
        code = code_spans(text) if code is None else code
        if about_markup:
            if not talked_about(text, m.start(), m.end(), code):
                return m.group()
        elif not _inside(code, m.start(), m.end()):
            return m.group()
    return None


def _check(record: RequestRecord, cfg: LeakKnobs) -> Found | None:
    leak = find_leak(record, cfg)
    return None if leak is None else Found(frozenset({Verdict.TOKEN_LEAK}), {"leak": leak})


def _describe(found: Mapping[str, Any]) -> list[str]:
    return [f"leak: {found['leak']}"] if found["leak"] else []


FAMILY = Family(name="leaks", verdicts=frozenset({Verdict.TOKEN_LEAK}),
                findings={"leak": str | None}, describe=_describe, check=_check,
                knobs=LeakKnobs)
