"""What judging costs: per reply as it completes, and per record after the run.

`classify` runs in the load generator's hot loop, once per reply, so its cost is paid
by every request; the run-level rules (divergent, cross-talk, the reference agreement)
run once per record over records.jsonl when the reports are built. Three sections:

- replies: the median cost of `classify` per reply of 64 and of 1024 tokens: the
  benchmark stub's reply (`loadgen.bench.stub`: honest reasoning and a `change_plan`
  call, on a record the engine's `RequestMaker` built for the tool-turn workload, what
  `dsv4-qual bench-client` judges), and a mixed corpus (the tests' honest families and
  shapes, token salad, broken text, loops and leaks, each text cut to the length).
  `--before DIR` times a copy of an older `loadgen/judge` package beside this
  checkout's, in alternating child processes (the same corpus, the same machine state),
  so a change to the judge is measured side by side;
- sizes: `classify` on replies of 1 KB to 64 KB (a 16k-token reply is about 64 KB):
  healthy English reasoning with a tool call, Chinese, and token salad;
- records: the run-level pass over records.jsonl.

    PYTHONPATH=. python benchmarks/bench_judge.py [--repeats 25]
        [--sections replies,sizes,records] [--before /tmp/judge_orig_pkg]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from loadgen.bench.client import BENCH_SCENARIO
from loadgen.bench.prose import prose_words
from loadgen.engine.requests import RequestMaker
from loadgen.expectations import Expectation, ExpectedCall
from loadgen.judge.gate.aggregate import aggregate
from loadgen.judge.gate.run_report import rules_for
from loadgen.judge.verdicts import classify
from loadgen.records import RequestRecord
from loadgen.scenario import Scenario, VerdictConfig
from loadgen.taxonomy import DEFAULT_FAIL_ON
from loadgen.workload import make_workload

REPO = Path(__file__).resolve().parent.parent
#: Reply lengths of the replies section, in tokens (the stub's default and its short one).
TOKENS = (64, 1024)
#: Characters per token of the mixed corpus's texts (English BPE, roughly).
CHARS_PER_TOKEN = 4

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


def stub_replies(tokens: int, count: int = 64) -> list[RequestRecord]:
    """Records as the engine builds them for the bench-client scenario's tool-turn
    requests, holding the reply the benchmark stub streams (`loadgen.bench.stub`): its
    reasoning tokens are the prose's words each with a space, then a `change_plan` call."""
    scenario = Scenario.model_validate(tomllib.loads(BENCH_SCENARIO.format(
        concurrency=64, requests=max(count, 100), tokens=tokens)))
    maker = RequestMaker(scenario, "bench", "bench-stub")
    words = prose_words()
    reasoning = "".join(words[i % len(words)] + " " for i in range(max(1, tokens - 8)))
    args = '{"account_id": "XEHM4B", "plan": "business"}'
    records = []
    for seq, item in zip(range(count), make_workload(scenario).items(), strict=False):
        record = maker.record("measurement", seq, item, "http://127.0.0.1", maker.body(item))
        record.reasoning, record.finish_reason = reasoning, "tool_calls"
        record.tool_calls = [{"id": "call_1", "type": "function",
                              "function": {"name": "change_plan", "arguments": args}}]
        records.append(record)
    return records


def _record(seq: int, params: dict[str, Any], finish: str, reasoning: str = "",
            content: str = "", tool_calls: list[dict[str, Any]] | None = None
            ) -> RequestRecord:
    return RequestRecord(run_id="bench", scenario="bench", phase="measurement", seq=seq,
                         endpoint="http://x", item_id=f"item/{seq}", params=params,
                         finish_reason=finish, reasoning=reasoning, content=content,
                         tool_calls=tool_calls or [])


def mixed_replies(tokens: int) -> list[RequestRecord]:
    """Replies of every shape the tests know, each text cut to `tokens` tokens' worth of
    characters: honest families and shapes (the judge must pass them), token salad,
    broken text, loops and leaks (it must not)."""
    sys.path.insert(0, str(REPO))
    from tests.support import broken_text, salad
    from tests.support.honest_shapes import honest_replies
    from tests.support.legit_families import family_replies

    chars = tokens * CHARS_PER_TOKEN
    call = [{"id": "c", "type": "function", "function": {
        "name": "change_plan", "arguments": '{"account_id": "XEHM4B", "plan": "business"}'}}]
    tool_params = {"tools": {"change_plan": ["account_id", "plan"]},
                   "expects_tool_call": True, "languages": ["en"]}
    out = []
    for reply in [*family_replies(), *honest_replies()]:
        out.append(_record(len(out), reply.params, reply.finish_reason,
                           reply.reasoning[:chars], reply.content[:chars], reply.tool_calls))
    texts = [make(seed, tokens) for make in salad.KINDS.values() for seed in range(4)]
    texts += [make(seed, tokens * 3 // 4) for make in broken_text.TEXT_FAMILIES.values()
              for seed in range(4)]
    texts += [("Wait, the user wants to upgrade XEHM4B to business, then cancel it. " * 99),
              "Upgrading now.</think><|im_end|> " * 20, "<｜begin▁of▁sentence｜>" * 40]
    for i, text in enumerate(texts):
        text = text[:chars]
        if i % 2:
            out.append(_record(len(out), tool_params, "tool_calls", text, "", call))
        else:
            out.append(_record(len(out), {"languages": ["en"]}, "stop", "", text))
    return out


def _time_replies(records: list[RequestRecord], passes: int) -> list[float]:
    """Seconds of `classify` per reply, every reply timed on its own, `passes` times."""
    cfg = VerdictConfig()
    clock = time.perf_counter
    times = []
    for _ in range(passes):
        for record in records:
            t0 = clock()
            classify(record, cfg)
            times.append(clock() - t0)
    return times


def replies_child(passes: int) -> None:
    """One child's timings, as JSON on stdout: per corpus, (median, mean) microseconds."""
    corpora = {f"{name} {tokens}": make(tokens) for tokens in TOKENS
               for name, make in (("stub", stub_replies), ("mixed", mixed_replies))}
    for records in corpora.values():
        _time_replies(records, 1)  # word lists, the language identifier, caches: loaded
    out = {}
    for name, records in corpora.items():
        times = _time_replies(records, passes)
        out[name] = (1e6 * statistics.median(times), 1e6 * statistics.fmean(times))
    print(json.dumps(out))


_CHILD = ("import sys, runpy\n"
          "if sys.argv[1]:\n"
          "    import loadgen.judge\n"
          "    loadgen.judge.__path__[:] = [sys.argv[1]]\n"
          "sys.argv = [sys.argv[2], '--replies-child', sys.argv[3]]\n"
          "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def _child(judge: str, passes: int) -> dict[str, tuple[float, float]]:
    """Times the replies in a fresh interpreter whose `loadgen.judge` package is read
    from `judge` ("": this checkout's): both versions alike, none warmed by the other."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, judge, __file__, str(passes)],
                          check=True, capture_output=True, text=True, env=env)
    return {k: (v[0], v[1]) for k, v in json.loads(proc.stdout.splitlines()[-1]).items()}


def per_reply_side_by_side(repeats: int, before: str | None) -> None:
    """Median per-reply `classify` time, this checkout against `before` (a copy of an
    older loadgen/judge), in alternating children; the median over the children."""
    sides = {"after": ""} if before is None else {"before": before, "after": ""}
    runs: dict[str, list[dict[str, tuple[float, float]]]] = {side: [] for side in sides}
    for _ in range(repeats):
        for side, judge in sides.items():
            runs[side].append(_child(judge, passes=5))
    print(f"classify per reply, microseconds (median of {repeats} children; each the median "
          "and mean over 5 passes of its corpus):")
    print(f"{'replies':<12}" + "".join(f"{side + ' med':>12}{side + ' mean':>12}"
                                       for side in sides)
          + ("     speed-up (median)" if before else ""))
    for name in runs["after"][0]:
        cells = {side: (statistics.median(r[name][0] for r in runs[side]),
                        statistics.median(r[name][1] for r in runs[side])) for side in sides}
        line = f"{name:<12}" + "".join(f"{m:>12.1f}{a:>12.1f}" for m, a in cells.values())
        if before:
            line += f"{cells['before'][0] / cells['after'][0]:>21.2f}x"
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--sections", default="replies,sizes,records",
                    help="which to run, comma-separated: replies, sizes, records")
    ap.add_argument("--before", metavar="DIR",
                    help="a copy of an older loadgen/judge package, timed beside this one "
                         "(replies section)")
    ap.add_argument("--children", type=int, default=5,
                    help="child processes per side in the replies section")
    ap.add_argument("--replies-child", type=int, metavar="PASSES", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replies_child:
        replies_child(args.replies_child)
        return
    sections = set(args.sections.split(","))
    if "replies" in sections:
        per_reply_side_by_side(args.children, args.before)
    if "sizes" in sections:
        per_reply(args.repeats)
    if "records" in sections:
        per_record(max(3, args.repeats // 5))


if __name__ == "__main__":
    main()
