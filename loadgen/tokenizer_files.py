"""The special tokens a served model's tokenizer declares, read from its files or its
server.

A judge that knows only a catalogue of chat-template markers misses a model whose
tokenizer adds its own (`[[EOT]]`, `<eom>`, `<|custom_end|>`...). Where the model's
files are at hand (a model directory, a Hugging Face snapshot, or one of its
`tokenizer.json` / `tokenizer_config.json`), every token they mark special is looked for
in the replies (`verdicts.tokenizer`, `judge.reply.leaks`). The files are read when the
scenario is loaded, so a path that is wrong is bad input before anything is sent.

A server that describes its tokenizer (vLLM's GET /tokenizer_info, served under
`--enable-tokenizer-info-endpoint`) is read too, before the first request
(`targets.tokenizer_info`): its document is tokenizer_config.json's keys, but with
each added token written as its bare text, so the flag that says which are special is
gone. From there, only tokens the document names special (`eos_token`,
`additional_special_tokens`...) and added tokens in the delimited form chat templates
give their markers (`<|...|>`, `<｜...｜>`) count: an added token may be a plain word.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
#: tokenizer_config.json's keys that name one special token each.
_NAMED = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
          "mask_token")


def _content(token: Any) -> str | None:
    """A token as tokenizer files write it: a string, or an object with `content`."""
    if isinstance(token, str):
        return token
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        return token["content"]
    return None


def _declared(doc: dict[str, Any]) -> list[str]:
    tokens: list[str] = []
    for entry in doc.get("added_tokens") or []:  # tokenizer.json
        if isinstance(entry, dict) and entry.get("special"):
            tokens.append(_content(entry) or "")
    decoder = doc.get("added_tokens_decoder")  # tokenizer_config.json
    if isinstance(decoder, dict):
        tokens += [_content(e) or "" for e in decoder.values()
                   if isinstance(e, dict) and e.get("special")]
    tokens += [_content(doc.get(key)) or "" for key in _NAMED]
    for key in ("additional_special_tokens", "extra_special_tokens"):
        extra = doc.get(key)
        if isinstance(extra, dict):
            extra = list(extra.values())
        if isinstance(extra, list):
            tokens += [_content(e) or "" for e in extra]
    return tokens


#: An added token in the form only chat-template markers take: `<|im_end|>`, `<｜User｜>`.
_DELIMITED = re.compile(r"<[|｜][^\s<>]{1,64}[|｜]>")


def declared_by_server(doc: dict[str, Any]) -> tuple[str, ...]:
    """The special tokens a server's description of its tokenizer declares: what it names
    special, and added tokens written bare that have the delimited marker form (the
    description lost their `special` flag), markup-like ones only, longest first."""
    tokens = list(_declared(doc))
    decoder = doc.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        tokens += [t for t in decoder.values()
                   if isinstance(t, str) and _DELIMITED.fullmatch(t.strip())]
    found = {t for t in tokens if is_markup_token(t)}
    return tuple(sorted(found, key=lambda t: (-len(t), t)))


def is_markup_token(token: str) -> bool:
    """A token that cannot be a word of text: three characters or more, not only
    letters, digits and spaces (a tokenizer that marks a word special does not make
    the word a leak)."""
    stripped = token.strip()
    return len(stripped) >= 3 and not stripped.replace(" ", "").isalnum()


def special_tokens(path: str | Path) -> tuple[str, ...]:
    """Every special token the tokenizer files at `path` declare (a directory holding
    them, or one file), markup-like ones only, longest first. Raises ValueError with a
    one-line reason when there is nothing to read."""
    where = Path(path).expanduser()
    if where.is_dir():
        files = [where / name for name in TOKENIZER_FILES if (where / name).is_file()]
        if not files:
            raise ValueError(f"{where} holds no {' or '.join(TOKENIZER_FILES)}")
    elif where.is_file():
        files = [where]
    else:
        raise ValueError(f"{where} does not exist")
    found: set[str] = set()
    for file in files:
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{file} is not a tokenizer file: {exc}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{file} is not a tokenizer file: not a JSON object")
        found.update(t for t in _declared(doc) if is_markup_token(t))
    return tuple(sorted(found, key=lambda t: (-len(t), t)))
