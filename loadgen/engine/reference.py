"""Which bodies the reference phase sends: a sample of what the measurement sends.

The measured seqs' items are known before anything is sent (workloads are
deterministic), so the sample is the same whether the phase runs before priming or
after measurement: the distinct items of the measured range, in order, picked evenly.
"""

from __future__ import annotations

import hashlib
import itertools

import orjson

from loadgen.scenario import Scenario
from loadgen.workload import WorkItem, make_workload


def reference_items(scenario: Scenario, chars_per_token: float | None) -> list[WorkItem]:
    """Up to `reference.requests` measured items with distinct bodies, evenly spread over
    the range."""
    wanted = scenario.reference.requests
    if wanted <= 0:
        return []
    load = scenario.load
    items = itertools.islice(make_workload(scenario, chars_per_token).items(),
                             load.priming, load.priming + load.measurement)
    by_id: dict[str, WorkItem] = {}
    for item in items:
        by_id.setdefault(item.item_id, item)
    # Two items may send the same body (a replay file with repeated lines): one each.
    distinct: dict[bytes, WorkItem] = {}
    for item in by_id.values():
        key = hashlib.blake2b(orjson.dumps([item.messages, item.tools, item.body]),
                              digest_size=16).digest()
        distinct.setdefault(key, item)
    pool = list(distinct.values())
    if len(pool) <= wanted:
        return pool
    return [pool[(i * len(pool)) // wanted] for i in range(wanted)]
