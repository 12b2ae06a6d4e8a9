"""How the judge scores families it was not tuned on: false "clean" and false alarms per
family, and what judging a reply costs, on this tree and (with --vs) another.

The families are generated here (tests/support: broken_text, broken_servers,
honest_requests, and the translated passages of tests/fixtures/honest_text) and written
to a JSON file of replies with the parameters a run gives their records; each tree then
classifies that same file in a process of its own (`loadgen.judge.verdicts.classify`),
so an older tree, which knows neither the families nor the newer rules, is measured on
exactly the same replies.

    python benchmarks/judge_families.py [--vs OTHER_TREE] [--members 24]

Prints, per family: replies, how many got a verdict the tree's default gate fails on
(broken families: the rest are false clean; honest ones: these are false alarms), and
the median microseconds `classify` took per reply and per KB of reply.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def generate(members: int) -> list[dict[str, Any]]:
    """Every family's replies, as records' fields (this tree's generators)."""
    sys.path.insert(0, str(ROOT))
    from tests.support import broken_servers, broken_text
    from tests.support.honest_requests import FAMILIES, Case

    english = {"languages": ["en"]}
    out: list[dict[str, Any]] = []

    def add(family: str, kind: str, params: dict[str, Any], **fields: Any) -> None:
        out.append({"family": family, "kind": kind, "params": params, **fields})

    for name, make in broken_text.TEXT_FAMILIES.items():
        for seed in range(members):
            text = make(seed, (20, 40, 80)[seed % 3])
            add(name, "broken", english, reasoning=text, finish_reason="tool_calls",
                tool_calls=[broken_servers._call("change_plan", account_id="XEHM4B",
                                                 plan="business")])
    for name in ("other_language", "cut_mid_sentence"):
        make = getattr(broken_text, name)
        for seed in range(members):
            add(name, "broken", english, content=make(seed, (20, 40, 80)[seed % 3]),
                finish_reason="stop")
    for seed in range(members):
        add("ramble", "broken", english, content=broken_text.ramble(seed, 80),
            finish_reason="length")
        add("unrequested_call", "broken", english, finish_reason="tool_calls",
            expected={"facts": {"account_id": "XEHM4B", "plan": "business"},
                      "call": {"name": "change_plan", "arguments": {
                          "account_id": "account_id", "plan": "plan"},
                          "steps": ["get_account"]}},
            tool_calls=[broken_servers._call("change_plan", account_id="XEHM4B",
                                             plan="business"),
                        broken_servers._call("cancel_subscription", account_id="XEHM4B",
                                             effective="immediately")])
    for name, make in FAMILIES.items():
        for seed in range(members):
            case = make(seed)
            add(name, "honest", case.params, reasoning=case.reasoning, content=case.content,
                finish_reason=case.finish_reason, tool_calls=case.tool_calls)
    corpus = json.loads(broken_text.HONEST_TEXT.read_text())
    for _lang, entry in corpus.items():
        for passage in entry["passages"][:members]:
            add(f"honest_text_{entry['script'].lower()}", "honest",
                Case("p", passage["text"]).params, content=passage["text"],
                finish_reason="stop")
    return out


def judge(path: Path) -> dict[str, dict[str, Any]]:
    """Classify every reply of the file with the tree this process imports."""
    from loadgen.judge.verdicts import classify
    from loadgen.records import RequestRecord
    from loadgen.scenario import VerdictConfig
    from loadgen.taxonomy import DEFAULT_FAIL_ON

    failing = {v.value for v in DEFAULT_FAIL_ON}  # what this tree's gate fails on
    cfg = VerdictConfig()
    replies = json.loads(path.read_text())
    out: dict[str, dict[str, Any]] = {}
    for reply in replies:
        fields = {k: reply[k] for k in ("reasoning", "content", "tool_calls", "finish_reason",
                                        "expected") if k in reply}
        record = RequestRecord(run_id="b", scenario="b", phase="measurement", seq=0,
                               endpoint="x", item_id="i", params=reply["params"], **fields)
        classify(record, cfg)  # warm (lexicons load once)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            verdicts = classify(record, cfg)
            times.append(time.perf_counter() - t0)
        gated = failing.intersection(verdicts)
        size = len(fields.get("reasoning", "")) + len(fields.get("content", "")) + len(
            json.dumps(fields.get("tool_calls") or []))
        row = out.setdefault(reply["family"], {"kind": reply["kind"], "replies": 0,
                                               "gated": 0, "us": [], "us_per_kb": []})
        row["replies"] += 1
        row["gated"] += bool(gated)
        row["us"].append(1e6 * min(times))
        row["us_per_kb"].append(1e6 * min(times) / max(size, 1) * 1000)
    return out


def _in_tree(tree: Path, path: Path) -> dict[str, dict[str, Any]]:
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "import benchmarks_judge as b; print(json.dumps(b.judge(__import__('pathlib')"
            ".Path(sys.argv[2]))))")
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "benchmarks_judge.py").write_text(Path(__file__).read_text())
        result = subprocess.run(
            [sys.executable, "-c", code, str(tree), str(path)], capture_output=True,
            text=True, check=True, cwd=scratch,
            env={"PYTHONPATH": f"{tree}:{scratch}", "PATH": "/usr/bin:/bin"})
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", type=Path, help="another tree to judge the same replies")
    parser.add_argument("--members", type=int, default=24)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "replies.json"
        path.write_text(json.dumps(generate(args.members), ensure_ascii=False))
        trees = {"this tree": ROOT, **({"--vs": args.vs.resolve()} if args.vs else {})}
        results = {name: _in_tree(tree, path) for name, tree in trees.items()}
    families = sorted(results["this tree"], key=lambda f: (results["this tree"][f]["kind"], f))
    head = f"{'family':<28}{'kind':<8}{'replies':>8}"
    for name in results:
        head += f"{name + ': gated':>20}{'us/reply':>10}{'us/KB':>8}"
    print(head)
    for family in families:
        row = results["this tree"][family]
        line = f"{family:<28}{row['kind']:<8}{row['replies']:>8}"
        for name in results:
            r = results[name].get(family)
            line += (f"{r['gated']:>20}{statistics.median(r['us']):>10.0f}"
                     f"{statistics.median(r['us_per_kb']):>8.0f}") if r else f"{'-':>38}"
        print(line)
    print("\nbroken: gated = caught (the rest are false clean); honest: gated = false alarms")


if __name__ == "__main__":
    main()
