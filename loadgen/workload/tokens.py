"""Token counts without a tokenizer (the run calibrates chars per token on the server's
/tokenize where it has one: `engine.preflight`)."""

from __future__ import annotations

# English prose through a BPE tokenizer of the DeepSeek/Llama families: ~4 chars/token.
DEFAULT_CHARS_PER_TOKEN = 4.0


def estimate_tokens(text: str, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> int:
    return max(1, round(len(text) / chars_per_token))
