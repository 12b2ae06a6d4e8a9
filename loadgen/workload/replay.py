"""replay: request bodies captured from production, one JSON object a line.

Bodies are sent as they are, except the keys the runner must own to measure (model,
stream, stream_options); the scenario's request settings only fill keys a body lacks.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import orjson

from loadgen.exit_codes import BadInputError
from loadgen.scenario import ReplayWorkload
from loadgen.workload.base import WorkItem
from loadgen.workload.tokens import estimate_tokens

OWNED_KEYS = ("model", "stream", "stream_options")


def load_bodies(path: Path) -> list[dict]:
    """Every body in the file; a bad line is a one-line error naming file and line."""
    bodies = []
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read replay file ({exc.strerror})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            body = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise BadInputError(f"{path}: line {number}: not valid JSON") from None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise BadInputError(f"{path}: line {number}: needs an object with a 'messages' list")
        bodies.append(body)
    if not bodies:
        raise BadInputError(f"{path}: replay file has no request bodies")
    return bodies


class Replay:
    kind = "replay"

    def __init__(self, cfg: ReplayWorkload) -> None:
        self.cfg = cfg
        self.bodies = load_bodies(Path(cfg.path))

    def items(self) -> Iterator[WorkItem]:
        order = list(range(len(self.bodies)))
        if self.cfg.shuffle:
            random.Random(f"replay/{self.cfg.seed}").shuffle(order)
        built = []
        for index in order:
            body = dict(self.bodies[index])
            messages = body.pop("messages")
            tools = body.pop("tools", None)
            for key in OWNED_KEYS:
                body.pop(key, None)
            chars = len(orjson.dumps(messages))
            built.append(WorkItem(
                item_id=f"replay/{index + 1}", messages=messages, tools=tools, body=body,
                approx_prompt_tokens=estimate_tokens("x" * chars),
            ))
        while True:
            yield from built
