"""What the `garbled` rule costs the load generator per reply.

`classify` runs once per reply in the load generator's hot loop, and a reply can be 16k
tokens (~64 KB). For replies of 1, 16 and 64 KB (UTF-8) of English prose, of Chinese,
of multilingual salad and of a reasoning loop (the #52448 signature), it prints the
median of `find_garble`'s time per reply, wall clock and process CPU time (the second
is less inflated on a shared machine), and what the rule found.

Usage, from the repository root:
    PYTHONPATH=. python benchmarks/bench_garbled.py
"""

from __future__ import annotations

import statistics
import time
import timeit

from loadgen.judge.reply.garbled import find_garble
from loadgen.records import RequestRecord
from loadgen.scenario import VerdictConfig
from tests.support import salad
from tests.support.legit_corpus import LONG_ANSWER, LONG_REASONING
from tests.support.legit_families import ZH, ZH_EN

TEXTS = {
    "prose": (LONG_ANSWER + "\n\n" + LONG_REASONING + "\n\n") * 40,
    "chinese": "".join(s.format(n=7, t=3) for s in (ZH + ZH_EN) * 200),
    "salad": salad.multilingual(1, 40_000),
    "loop": "Wait, the user wants to upgrade XEHM4B to business, then cancel it. " * 1000,
}


def sized(text: str, kb: int) -> str:
    """The text's first `kb` KB of UTF-8, whole characters."""
    return text.encode()[:kb * 1024].decode(errors="ignore")


def median_ms(call: object, number: int, timer: object) -> float:
    runs = timeit.repeat(call, number=number, repeat=9, timer=timer)  # type: ignore[arg-type]
    return statistics.median(runs) / number * 1e3


def main() -> None:
    cfg = VerdictConfig()
    print(f"{'reply':8} {'size':>5}  {'wall ms':>8}  {'cpu ms':>7}  found")
    for name, text in TEXTS.items():
        for kb in (1, 16, 64):
            record = RequestRecord(run_id="r", scenario="s", phase="m", seq=0, endpoint="x",
                                   item_id="i", content=sized(text, kb))
            found = find_garble(record, cfg)
            number = 20 if kb == 64 else 100

            def call(record: RequestRecord = record) -> object:
                return find_garble(record, cfg)

            wall = median_ms(call, number, time.perf_counter)
            cpu = median_ms(call, number, time.process_time)
            print(f"{name:8} {kb:>3} KB  {wall:8.3f}  {cpu:7.3f}  {found.kind if found else '-'}")


if __name__ == "__main__":
    main()
