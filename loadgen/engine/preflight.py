"""Before the first request: can what this run asks fit the server's context?

vLLM refuses (HTTP 400) a request whose prompt plus `max_tokens` is more than the
model's `max_model_len`, and so does the sim. A run whose longest request cannot fit
would spend its priming on refusals and end without one reply (the issue that asked
for this: `pr-51318`'s max_tokens 16384 against the sim's 4096). vLLM and the sim state
`max_model_len` per model in /v1/models; where a server states it, every base URL is
checked against the longest request the workload will send, and a run that cannot fit
is invalid before anything is sent, naming both numbers and what to do. A server that
states nothing is not checked (a note says so).

The prompt's length is a lower bound, so that the check never refuses a run that would
fit: the server's own tokenizer (POST /tokenize, vLLM's and the sim's) counts the
longest prompt's texts where it answers, else their words are counted (the tokenizers
of the DeepSeek, Llama, Qwen and GPT families split text at whitespace before merging,
so every word is at least one token). The chat template's and the tools' tokens come on
top and are not counted.

The same tokenizer calibrates long-context documents first (chars per token of their
prose), so the lengths the scenario asks for are the lengths sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from loadgen.engine.plan import RunPlan
from loadgen.engine.requests import RequestMaker
from loadgen.exit_codes import RunInvalidError
from loadgen.judge.text.scripts import message_texts
from loadgen.targets.readiness import ServerReady
from loadgen.workload import WorkItem

TOKENIZE_TIMEOUT_S = 30.0
# Prose of the kind long-context documents are made of, for the chars-per-token
# calibration.
CALIBRATION_TEXT = (
    "The quarterly infrastructure review covered storage growth, network egress, "
    "scheduled maintenance windows and the migration of billing records to the new "
    "ledger service. Several teams asked for more detailed capacity forecasts. "
) * 8


@dataclass(frozen=True)
class LongestRequest:
    """The request of the run that needs the most context, and what it needs at least."""

    item_id: str
    max_tokens: int
    prompt_tokens: int  # a lower bound
    counted_by: str  # how prompt_tokens was counted, in words

    @property
    def needs(self) -> int:
        return self.max_tokens + self.prompt_tokens


def item_texts(item: WorkItem) -> list[str]:
    """The texts of an item's messages (content, text parts, tool-call arguments)."""
    return [text for text in message_texts(item.messages) if text]


def words(texts: Iterable[str]) -> int:
    """Whitespace-separated words: a floor on the tokens of the texts."""
    return sum(len(text.split()) for text in texts)


def _max_tokens(raw: bytes) -> int | None:
    """The completion limit a body sends (vLLM reads max_completion_tokens first)."""
    body: dict[str, Any] = orjson.loads(raw)
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def longest_by_words(items: Iterable[WorkItem], maker: RequestMaker
                     ) -> tuple[WorkItem, int, int] | None:
    """(item, its max_tokens, its prompt's words) of the item whose max_tokens plus words
    is largest; None when no body states a max_tokens (the server then picks one)."""
    best: tuple[WorkItem, int, int] | None = None
    for item in items:
        max_tokens = _max_tokens(maker.body(item).raw)
        if max_tokens is None:
            continue
        count = words(item_texts(item))
        if best is None or max_tokens + count > best[1] + best[2]:
            best = (item, max_tokens, count)
    return best


async def server_token_count(http: httpx.AsyncClient, base_url: str, model: str,
                             prompt: str) -> int | None:
    """The tokens of `prompt` by the server's own tokenizer (vLLM's and the sim's POST
    /tokenize); None when the server has none or answers oddly, so the caller's estimate
    stays."""
    try:
        resp = await http.post(f"{base_url}/tokenize", json={"model": model, "prompt": prompt},
                               timeout=TOKENIZE_TIMEOUT_S)
        if resp.status_code != 200:
            return None
        data = resp.json()
        count = data.get("count") or len(data.get("tokens") or [])
    except (httpx.HTTPError, ValueError, AttributeError, TypeError):
        return None
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        return None
    return count


async def calibrate_chars_per_token(http: httpx.AsyncClient, base_url: str, model: str,
                                    sample: str = CALIBRATION_TEXT) -> float | None:
    """Chars per token of English prose by the server's tokenizer, so long-context
    documents reach the lengths the scenario asks for; None: the estimate stays."""
    count = await server_token_count(http, base_url, model, sample)
    return None if count is None else len(sample) / count


async def tokenizer_count(http: httpx.AsyncClient, base_url: str, model: str,
                          texts: list[str]) -> int | None:
    """A floor on the tokens of `texts` from the server's tokenizer (the texts joined by
    newlines, less one token a join); None when the server has no /tokenize."""
    count = await server_token_count(http, base_url, model, "\n".join(texts))
    return None if count is None else max(0, count - len(texts))


async def longest_request(http: httpx.AsyncClient, base_url: str, model: str,
                          plan: RunPlan) -> LongestRequest | None:
    """The run's request that needs the most context, counted as surely as the server
    allows; None when no request states max_tokens."""
    found = longest_by_words(plan.distinct(), plan.maker)
    if found is None:
        return None
    item, max_tokens, floor = found
    texts = item_texts(item)
    counted = await tokenizer_count(http, base_url, model, texts)
    if counted is not None and counted >= floor:
        return LongestRequest(item.item_id, max_tokens, counted, "the server's tokenizer")
    return LongestRequest(item.item_id, max_tokens, floor, "its words")


def misfit(ready: ServerReady, model: str, longest: LongestRequest) -> str | None:
    """Why the longest request cannot fit this server (None: it fits, or the server
    does not say how much fits)."""
    limit = ready.max_model_len(model)
    if limit is None or longest.needs <= limit:
        return None
    if longest.max_tokens > limit:
        what = f"max_tokens {longest.max_tokens} alone is more than that"
    else:
        what = (f"max_tokens {longest.max_tokens} plus the longest prompt (at least "
                f"{longest.prompt_tokens} tokens by {longest.counted_by}, {longest.item_id})"
                f" needs {longest.needs}")
    return (f"server {ready.base_url} serves {model} with max_model_len {limit}: {what}, "
            "so the server would refuse these requests (HTTP 400). Serve the model with a "
            f"--max-model-len above {longest.needs} (the chat template and the tools come "
            "on top), or run a scenario whose max_tokens and prompts fit (a --max-tokens "
            "below the scenario's weakens its load and needs --accept-weaker-load)")


async def check_context_fits(http: httpx.AsyncClient, ready: list[ServerReady], model: str,
                             plan: RunPlan, note: Callable[[str], None] | None = None) -> None:
    """RunInvalidError (nothing sent yet) when a server states a max_model_len that the
    run's longest request (of `plan`'s, whose bodies are `model`'s) cannot fit."""
    stating = [info for info in ready if info.max_model_len(model) is not None]
    if note is not None:
        for info in ready:
            if info.max_model_len(model) is None:
                note(f"{info.base_url} does not state max_model_len for {model}: whether "
                     "the requests fit its context is not checked before sending")
    if not stating:
        return
    longest = await longest_request(http, stating[0].base_url, model, plan)
    if longest is None:
        return
    for info in stating:
        reason = misfit(info, model, longest)
        if reason is not None:
            raise RunInvalidError(reason)
