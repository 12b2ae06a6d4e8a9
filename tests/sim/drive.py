"""Drive the sim's engine directly (no HTTP): a closed loop of clients whose requests differ.

Each request draws (from its seed) what it asks, so its script's length differs, its
`max_tokens` and its prompt length: starts and finishes interleave, steps mix decode
and prefill tokens, and two seeds give two different runs. Imports only server_patch
(torch), so the GPU tests can use it on a bare GPU host.

`billing` requests carry facts of their own, as the workloads do: every request its
own account and contract codes, in the long-context shape (the document's first line
names them, the ask is the last paragraph), with or without tools.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence
from typing import Any

from server_patch.c128a import C128ABuilder
from server_patch.sim.closed_loop import ClosedLoopRun, run_closed_loop
from server_patch.sim.config import SimConfig
from server_patch.sim.engine import Engine
from server_patch.sim.model import Reply, make_script

ASKS = (
    "Please upgrade XEHM4B to business, then cancel it.",
    "Cancel QPRL7Z.",
    "Move account ZX81KQ to the free plan, and tell me what changes for the team, its "
    "invoices and its billing contact once the current period ends next month.",
    "Why was AB12CD charged twice this month?",
)
PROMPT_TOKENS = (40, 90, 300, 700)
MAX_TOKENS = (24, 48, 80, 160)
PLANS = ("free", "pro", "business", "enterprise")
TOOLS = [{"type": "function", "function": {
    "name": "change_plan", "description": "Move an account to another plan; takes effect "
    "immediately.",
    "parameters": {"type": "object", "properties": {
        "account_id": {"type": "string", "description": "Account id, e.g. XEHM4B."},
        "plan": {"type": "string", "enum": list(PLANS)}},
        "required": ["account_id", "plan"]}}}, {"type": "function", "function": {
    "name": "get_account", "description": "Look up an account's plan, status and renewal date.",
    "parameters": {"type": "object", "properties": {
        "account_id": {"type": "string", "description": "Account id, e.g. XEHM4B."}},
        "required": ["account_id"]}}}]

#: What a client sends: (messages, tools) drawn from the run's generator.
Body = Callable[[random.Random], tuple[list[dict[str, Any]], list[dict[str, Any]] | None]]

#: An engine after a run, and its requests in the order they were sent.
Driven = ClosedLoopRun


def code(rng: random.Random, length: int) -> str:
    """A code: upper-case letters and digits, at least one of each."""
    letters = [rng.choice(string.ascii_uppercase) for _ in range(length - 1)]
    letters.insert(rng.randrange(length), rng.choice(string.digits))
    return "".join(letters)


def billing_messages(account: str, contract: str, ask: str) -> list[dict[str, Any]]:
    document = (f"Billing history of account {account}, contract {contract}.\n\n"
                "Ledger entries follow for the period, with invoices and credits.")
    return [{"role": "system", "content": "You are the billing assistant."},
            {"role": "user", "content": f"{document}\n\n{ask}"}]


def billing(tools: bool) -> Body:
    """Long-context requests with their own codes: a change_plan turn, or an answer."""
    def body(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        account, contract = code(rng, 6), code(rng, 8)
        if tools:
            ask = (f"Move the account whose billing history is above to the "
                   f"{rng.choice(PLANS)} plan now.")
            return billing_messages(account, contract, ask), TOOLS
        ask = ("State the account id and the contract number of the account above, then "
               "summarize its usage in three sentences.")
        return billing_messages(account, contract, ask), None
    return body


def billing_mix(rng: random.Random
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """Half change_plan turns, half answers."""
    return billing(tools=rng.random() < 0.5)(rng)


def asks(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    return [{"role": "user", "content": rng.choice(ASKS)}], None


def drive(layout: str, concurrency: int, requests: int, *, device: str = "cpu", seed: int = 0,
          build: C128ABuilder | None = None, body: Body = asks,
          max_tokens: Sequence[int] = MAX_TOKENS, prompt_tokens: Sequence[int] = PROMPT_TOKENS,
          **config: Any) -> Driven:
    """`concurrency` clients, each sending its next request when the last one finishes."""
    rng = random.Random(seed)
    cfg = SimConfig(**{"layout": layout, "device": device, "max_num_seqs": 32,
                       "max_model_len": 2048, **config})

    def next_request() -> tuple[int, Reply]:
        messages, tools = body(rng)
        reply = Reply(make_script(messages, tools), rng.choice(max_tokens))
        return rng.choice(prompt_tokens), reply

    return run_closed_loop(Engine(cfg, build), next_request, concurrency=concurrency,
                           count=requests)


#: Mixed context lengths well below max_model_len, every request with codes of its own,
#: and room to finish: the run in which packed shows every face of the bug.
MIXED_BILLING: dict[str, Any] = {
    "concurrency": 16, "requests": 96, "body": billing_mix, "max_tokens": (160,),
    "prompt_tokens": (150, 300, 600, 1200, 1800), "max_model_len": 4096}
