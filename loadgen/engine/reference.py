"""Which bodies the reference phase sends: a sample of what the measurement sends.

The measured seqs' items are known before anything is sent (workloads are
deterministic), so the sample is the same whether the phase runs before priming or
after measurement: the distinct items of the measured range, in order, picked evenly.
"""

from __future__ import annotations

import itertools

from loadgen.scenario import Scenario
from loadgen.workload import WorkItem, make_workload


def reference_items(scenario: Scenario, chars_per_token: float | None) -> list[WorkItem]:
    """Up to `reference.requests` distinct measured items, evenly spread over the range."""
    wanted = scenario.reference.requests
    if wanted <= 0:
        return []
    load = scenario.load
    items = itertools.islice(make_workload(scenario, chars_per_token).items(),
                             load.priming, load.priming + load.measurement)
    distinct: dict[str, WorkItem] = {}
    for item in items:
        distinct.setdefault(item.item_id, item)
    pool = list(distinct.values())
    if len(pool) <= wanted:
        return pool
    return [pool[(i * len(pool)) // wanted] for i in range(wanted)]
