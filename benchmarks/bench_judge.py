"""What judging costs: per reply as it completes, and per record after the run.

`classify` runs in the load generator's hot loop, once per reply, so its cost is paid
by every request; the run-level rules (divergent, cross-talk, the reference agreement)
run once per record over records.jsonl when the reports are built. This prints the
median cost of each on replies of 1 KB to 64 KB (a 16k-token reply is about 64 KB):
healthy English reasoning with a tool call, Chinese, and token salad.

    python benchmarks/bench_judge.py [--repeats 25]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from loadgen.expectations import Expectation, ExpectedCall
from loadgen.judge.aggregate import aggregate
from loadgen.judge.run_report import rules_for
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import Scenario, VerdictConfig
from loadgen.taxonomy import DEFAULT_FAIL_ON

SIZES = (1_000, 16_000, 64_000)
OFFERED = {"change_plan": ["account_id", "plan"], "get_account": ["account_id"]}
_EN = ("the user wants account {acc} moved to the enterprise plan and then cancelled so I "
       "check the record first the seats are twelve the renewal is in december and nothing "
       "blocks an upgrade from pro invoice {n} was paid on time and the owner confirmed the "
       "request by email which means the change can go ahead").split()
_ZH = "用户要求先把账户升级到企业版然后取消订阅我需要先确认账户状态座位数量和续费日期再调用工具"
_SALAD = ["ения", "ulações", "的", "สำ", "ーション", "ynchron", "<｜begin▁of▁sentence｜>",
          "ifiers", "ção", "ẩ", "Ġthe", "нат", "ları", "ประ", "izz"]


def prose(size: int, rng: random.Random) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        word = rng.choice(_EN).format(acc="K7Q2ZD", n=rng.randrange(10_000))
        words.append(word)
    return " ".join(words)[:size]


def chinese(size: int, rng: random.Random) -> str:
    chars = []
    while len("".join(chars).encode()) < size:
        chars.append(_ZH[rng.randrange(len(_ZH))] + ("，" if rng.random() < 0.08 else ""))
    return "".join(chars)


def salad(size: int, rng: random.Random) -> str:
    parts: list[str] = []
    while sum(len(p) for p in parts) < size:
        parts.append(rng.choice(_SALAD) + (" " if rng.random() < 0.5 else ""))
    return "".join(parts)


def reply(text: str, seq: int = 0, account: str = "K7Q2ZD") -> RequestRecord:
    expected = Expectation(facts={"account_id": account, "plan": "enterprise"},
                           distinctive=("account_id",),
                           call=ExpectedCall("change_plan", {"account_id": "account_id",
                                                             "plan": "plan"}))
    args = orjson.dumps({"account_id": account, "plan": "enterprise"}).decode()
    return RequestRecord(
        run_id="bench", scenario="bench", phase="measurement", seq=seq, endpoint="http://x",
        item_id=f"item/{account}", finish_reason="tool_calls", reasoning=text,
        tool_calls=[{"id": "c", "type": "function",
                     "function": {"name": "change_plan", "arguments": args}}],
        params={"tools": OFFERED, "expects_tool_call": True}, expected=expected.to_dict(),
        greedy=True, body_hash=f"h{account}")


def median_us(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def per_reply(repeats: int) -> None:
    cfg = VerdictConfig()
    rng = random.Random(52448)
    print("classify (once per reply, in the hot loop), median microseconds:")
    print(f"{'reply':<10}" + "".join(f"{size // 1000:>8} KB" for size in SIZES))
    for name, make in (("English", prose), ("Chinese", chinese), ("salad", salad)):
        cells = []
        for size in SIZES:
            record = reply(make(size, rng))
            cells.append(median_us(lambda r=record: classify(r, cfg), repeats))
        print(f"{name:<10}" + "".join(f"{c:>11.0f}" for c in cells))


def per_record(repeats: int, records: int = 512, size: int = 64_000) -> None:
    """The run-level pass over records.jsonl: 16k-token replies, a reference phase."""
    rng = random.Random(7)
    scenario = Scenario.model_validate({"reference": {"requests": 16},
                                        "workload": {"kind": "tool-turn"}})
    texts = [prose(size, rng) for _ in range(8)]
    with tempfile.TemporaryDirectory(prefix="dsv4-qual-bench-judge-") as tmp:
        out = Path(tmp)
        with open(out / "records.jsonl", "wb") as fh:
            for seq in range(records + 16):
                account = f"A{seq % 16:02d}B{seq % 16:02d}"  # 16 distinct requests
                rec = reply(texts[seq % len(texts)], seq, account)
                rec.phase = "reference" if seq >= records else "measurement"
                rec.verdicts = classify(rec, VerdictConfig())
                fh.write(rec.to_json() + b"\n")
        fail_on = [str(v) for v in DEFAULT_FAIL_ON]
        with_rules = median_us(lambda: aggregate(out, fail_on, rules_for(scenario)), repeats)
        without = median_us(lambda: aggregate(out, fail_on, []), repeats)
    n = records + 16
    print(f"\nafter the run, {n} records of {size // 1000} KB each (records.jsonl "
          f"{n * size / 1e6:.0f} MB): counting pass {without / n:.0f} us/record, with the "
          f"run-level rules {with_rules / n:.0f} us/record "
          f"(+{(with_rules - without) / n:.0f} us/record)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=25)
    args = ap.parse_args()
    per_reply(args.repeats)
    per_record(max(3, args.repeats // 5))


if __name__ == "__main__":
    main()
