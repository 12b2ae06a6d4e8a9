"""A request that asks for several choices (`n`, from the body sent) is judged on choice 0.

vLLM streams each choice of an `n > 1` request in chunks of its own (`index` 1, 2...),
interleaved as the engine steps them, and counts every choice's tokens in `usage`.
Read as one reply, the choices would make one interleaved text (a false `garbled` or
`disordered_stream`) and a count above max_tokens (a false `usage_mismatch`).

Generated: n of 1-4, the choices' deltas interleaved in random order, sometimes several
choices in one chunk, choice 0 ending first or last. The record holds choice 0's text
exactly, is judged ok, and its usage is not impossible. A chunk with a choice the
request did not ask for is a broken stream.
"""

from __future__ import annotations

import asyncio
import random

import httpx
import orjson
import pytest

from loadgen.engine.client import ChatClient, Timeouts
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig

TIMEOUTS = Timeouts(connect=2.0, first_token=2.0, idle=2.0, total=10.0)
ANSWERS = ("Paris is the capital of France, on the Seine.",
           "The capital of France is Paris; it lies on the Seine.",
           "France's capital is Paris, a city on the river Seine.",
           "Paris, on the Seine, is the capital city of France.")
THOUGHT = "The user asks for the capital of France. It is Paris. I answer in one sentence."


def _chunk(choices: list[dict], usage: dict | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": choices}
    if usage:
        body["usage"] = usage
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _words(text: str) -> list[str]:
    parts = text.split(" ")
    return [p + " " for p in parts[:-1]] + [parts[-1]]


def stream(rng: random.Random, n: int, *, stray: int | None = None) -> tuple[bytes, str]:
    """n choices' deltas interleaved at random; choice 0's answer."""
    answers = [ANSWERS[(i + rng.randrange(4)) % 4] for i in range(n)]
    queues = [[("reasoning", w) for w in _words(THOUGHT)]
              + [("content", w) for w in _words(a)] for a in answers]
    events: list[bytes] = [_chunk([{"index": i, "delta": {"role": "assistant"}}
                                   for i in range(n)])]
    tokens = 0
    while any(queues):
        live = [i for i, q in enumerate(queues) if q]
        together = rng.sample(live, rng.randint(1, len(live))) if rng.random() < 0.3 \
            else [rng.choice(live)]
        choices = []
        for i in together:
            kind, text = queues[i].pop(0)
            tokens += 1
            finish = "stop" if not queues[i] else None
            choices.append({"index": i, "delta": {kind: text}, "finish_reason": finish})
        events.append(_chunk(choices))
        if stray is not None and rng.random() < 0.2:
            events.append(_chunk([{"index": stray, "delta": {"content": "x "}}]))
            stray = None
    events.append(_chunk([], usage={"prompt_tokens": 9, "completion_tokens": tokens,
                                    "total_tokens": 9 + tokens}))
    return b"".join(events) + b"data: [DONE]\n\n", answers[0]


async def _receive(payload: bytes, n: int, max_tokens: int) -> RequestRecord:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=payload,
                              headers={"content-type": "text/event-stream"})

    body = {"model": "m", "messages": [{"role": "user", "content": "Capital of France?"}],
            "max_tokens": max_tokens, "n": n, "stream": True}
    record = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                           endpoint="http://a.test", item_id="i",
                           params={"max_tokens": max_tokens, "n": n, "stream": True,
                                   "temperature": 0.7})
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        await ChatClient(http, TIMEOUTS).send(record, orjson.dumps(body), True)
    record.verdicts = classify(record, VerdictConfig())
    return record


def receive(payload: bytes, n: int, max_tokens: int = 40) -> RequestRecord:
    return asyncio.run(_receive(payload, n, max_tokens))


def test_each_request_is_judged_on_its_choice_zero() -> None:
    wrong = []
    for seed in range(120):
        rng = random.Random(seed)
        n = rng.randint(1, 4)
        payload, answer = stream(rng, n)
        record = receive(payload, n)
        if (record.content != answer or record.reasoning != THOUGHT
                or record.verdicts != ["ok"] or record.finish_reason != "stop"):
            wrong.append((seed, n, record.content, record.verdicts, record.error))
    assert wrong == []


def test_usage_counts_every_choice_against_max_tokens_each() -> None:
    rng = random.Random(7)
    payload, _ = stream(rng, 3)
    assert receive(payload, 3, max_tokens=40).verdicts == ["ok"]
    # The same count for one choice is impossible: more than its max_tokens.
    one = receive(payload.replace(b'"index":1', b'"index":0').replace(b'"index":2',
                                                                      b'"index":0'), 1)
    assert "usage_mismatch" in one.verdicts or one.error, one.verdicts


@pytest.mark.parametrize("n,stray", [(1, 1), (2, 2), (3, 7), (2, -1)])
def test_a_choice_the_request_did_not_ask_for_is_a_broken_stream(n: int, stray: int
                                                                  ) -> None:
    for seed in range(20):
        payload, _ = stream(random.Random(seed), n, stray=stray)
        if b'"content":"x "' in payload:
            break
    record = receive(payload, n)
    assert record.error and "choice with index" in record.error, (record.error,
                                                                  record.verdicts)


def test_a_reply_not_streamed_is_judged_on_its_choice_zero() -> None:
    def message(i: int) -> dict:
        return {"index": i, "finish_reason": "stop",
                "message": {"role": "assistant", "content": ANSWERS[i]}}

    payload = orjson.dumps({"id": "c", "object": "chat.completion", "model": "m",
                            "choices": [message(2), message(0), message(1)],
                            "usage": {"prompt_tokens": 9, "completion_tokens": 36,
                                      "total_tokens": 45}})

    async def go() -> RequestRecord:
        async def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, content=payload,
                                  headers={"content-type": "application/json"})
        record = RequestRecord(run_id="r", scenario="s", phase="measurement", seq=0,
                               endpoint="http://a.test", item_id="i",
                               params={"max_tokens": 40, "n": 3, "stream": False})
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            await ChatClient(http, TIMEOUTS).send(record, b"{}", False)
        record.verdicts = classify(record, VerdictConfig())
        return record

    record = asyncio.run(go())
    assert record.content == ANSWERS[0] and record.verdicts == ["ok"], record
