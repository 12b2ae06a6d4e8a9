"""What the run-level rule for loops by meaning costs per reply (`find_meaning_loop`,
`judge/reply/restatement.py`), with the default `VerdictConfig()`.

Corpora of completed replies, each judged as the run-level pass judges it:

- `stub-1024`: the benchmark stub's 1024-token reply as the client assembles it (honest
  prose reasoning and a tool call, `tool_calls`), `stub-1024-answer` its `answer` shape
  (reasoning and an answer in prose, `stop`); every stub reply is the same text;
- `prose-64`, `prose-1024`: honest prose of 64 and 1024 words drawn at varied offsets
  of the stub's prose, finished by `stop`; `prose-1024-cut` the same cut by `length`
  (a cut reply is read whatever its sentence ends);
- `loop-4k`: a reasoning that says a few sentences again and again for about 4,000
  characters, cut by `length` (a loop the rule finds).

Each round times every corpus once (process CPU time); the medians over the rounds are
printed, in microseconds per reply.

    python benchmarks/bench_restatement.py [--rounds 7] [--replies 100] [--before DIR]

`--before DIR`: another checkout (e.g. `git worktree add DIR COMMIT`) imported in a
subprocess of its own, its rounds taken in turn with this checkout's (also a
subprocess), so both see the same machine: both medians, their ratio, and whether the
two gave the same findings on every reply.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _stub_reply(tokens: int, shape: str) -> tuple[str, str, str]:
    """(reasoning, content, finish) of one stub reply, assembled from its events."""
    import orjson

    from loadgen.bench.stub import build_events

    reasoning, content, finish = [], [], ""
    for event in build_events(tokens, shape):
        if not event.startswith(b"data: {"):
            continue
        for choice in orjson.loads(event[6:]).get("choices", []):
            delta = choice.get("delta", {})
            reasoning.append(delta.get("reasoning") or "")
            content.append(delta.get("content") or "")
            finish = choice.get("finish_reason") or finish
    return "".join(reasoning), "".join(content), finish


def corpora(replies: int) -> dict[str, list[Any]]:
    """Records to judge, by corpus."""
    import random

    from loadgen.bench.prose import prose_words
    from loadgen.records import RequestRecord

    def record(seq: int, reasoning: str, content: str, finish: str) -> RequestRecord:
        return RequestRecord(run_id="bench", scenario="bench", phase="measurement", seq=seq,
                             endpoint="http://stub", item_id="bench", params={},
                             finish_reason=finish, reasoning=reasoning, content=content)

    words = prose_words()
    rng = random.Random(1024)

    def prose(n: int) -> str:
        start = rng.randrange(len(words))
        return " ".join(words[(start + i) % len(words)] for i in range(n)) + " "

    sentences = [s + "." for s in " ".join(words).split(". ")[:40]]

    def loop(chars: int) -> str:
        chosen = rng.sample(sentences, 4)
        out: list[str] = []
        while sum(map(len, out)) < chars:
            rng.shuffle(chosen)
            out += chosen
        return " ".join(out)

    stub = _stub_reply(1024, "tool")
    answer = _stub_reply(1024, "answer")
    return {
        "stub-1024": [record(i, *stub) for i in range(replies)],
        "stub-1024-answer": [record(i, *answer) for i in range(replies)],
        "prose-64": [record(i, prose(64), "", "stop") for i in range(replies)],
        "prose-1024": [record(i, prose(1016), "", "stop") for i in range(replies)],
        "prose-1024-cut": [record(i, prose(1016), "", "length") for i in range(replies)],
        "loop-4k": [record(i, loop(4000), "", "length") for i in range(max(1, replies // 4))],
    }


def worker(tree: str, replies: int) -> None:
    """Judges the corpora with the checkout at `tree`, a round per line read."""
    sys.path.insert(0, tree)
    from loadgen.judge.reply.loops import find_meaning_loop
    from loadgen.scenario import VerdictConfig

    cfg = VerdictConfig()
    records = corpora(replies)
    found = {name: [None if (f := find_meaning_loop(r, cfg)) is None
                    else [f.field, f.kind, f.unit, f.repeats] for r in rs]
             for name, rs in records.items()}
    import loadgen

    print(json.dumps({"module": str(Path(loadgen.__file__).resolve().parent.parent),
                      "found": found}), flush=True)
    for _ in sys.stdin:
        out = {}
        for name, rs in records.items():
            start = time.process_time()
            for r in rs:
                find_meaning_loop(r, cfg)
            out[name] = (time.process_time() - start) / len(rs) * 1e6
        print(json.dumps(out), flush=True)


def _start(tree: Path, replies: int) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen([sys.executable, __file__, "--worker", str(tree),
                             "--replies", str(replies)], cwd=tree, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    if Path(ready["module"]) != tree.resolve():
        raise SystemExit(f"{tree}: imported loadgen from {ready['module']}")
    return proc, ready


def _round(proc: subprocess.Popen[str]) -> dict[str, float]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("round\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--replies", type=int, default=100, help="replies per corpus")
    ap.add_argument("--before", type=Path, help="another checkout to time in turn")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.replies)
        return
    trees = {"after": REPO} | ({"before": args.before} if args.before else {})
    procs = {}
    found = {}
    for label, tree in trees.items():
        procs[label], ready = _start(tree, args.replies)
        found[label] = ready["found"]
    rounds: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for _ in range(args.rounds):
        for label, proc in procs.items():  # in turn: both see the same machine
            rounds[label].append(_round(proc))
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    names = list(rounds["after"][0])
    medians = {label: {n: statistics.median(r[n] for r in rs) for n in names}
               for label, rs in rounds.items()}
    print(f"median CPU us per reply, {args.rounds} rounds, find_meaning_loop, "
          f"VerdictConfig()")
    head = f"{'corpus':18s} {'replies':>7s} {'loops':>5s} {'after':>9s}"
    if args.before:
        head += f" {'before':>9s} {'before/after':>12s}"
    print(head)
    for n in names:
        line = (f"{n:18s} {len(found['after'][n]):7d} "
                f"{sum(f is not None for f in found['after'][n]):5d} "
                f"{medians['after'][n]:9.0f}")
        if args.before:
            line += f" {medians['before'][n]:9.0f} " \
                    f"{medians['before'][n] / medians['after'][n]:12.2f}"
        print(line)
    if args.before:
        same = found["before"] == found["after"]
        print(f"same findings on every reply: {'yes' if same else 'NO'}")
        if not same:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
