"""The special tokens a served model's tokenizer declares, read from its files.

A judge that knows only a catalogue of chat-template markers misses a model whose
tokenizer adds its own (`[[EOT]]`, `<eom>`, `<|custom_end|>`...). Where the model's
files are at hand (a model directory, a Hugging Face snapshot, or one of its
`tokenizer.json` / `tokenizer_config.json`), every token they mark special is looked for
in the replies (`verdicts.tokenizer`, `judge.reply.leaks`). The files are read when the
scenario is loaded, so a path that is wrong is bad input before anything is sent.
"""

from __future__ import annotations

import json
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
