"""Streamed tokens (and requests) per client CPU-second: this checkout, an older one, locust.

The project's stub (`loadgen.bench.stub`, burst mode, so the client is the bottleneck)
serves replies of `--tokens` streamed tokens (1024 by default), pinned to one core. Three
clients, each pinned to another core, send it the same number of requests at the same
concurrency, one after the other, alternating over `--repeats` rounds:

- after:  this checkout's `python -m loadgen run` (verdicts and records on, as
          `dsv4-qual bench-client` runs it);
- before: the same command in a temporary `git worktree` of `--before` (default
          cd31672, before the judge's per-reply rules grew: token salad, wrong answers,
          loops that see through counters, invisible content), same interpreter;
- locust: a `FastHttpUser` (a locustfile written into a temporary directory) that POSTs
          the same streamed chat completion, reads the SSE stream to its end (64 KB reads
          split into lines; `--locust-read iter-lines`: locust's own line helper), parses
          each `data:` line's JSON with the standard library, counts the chunks that carry
          a token and checks that count against the reply's `usage`; headless, all users
          spawned at once, stopping after the same number of requests. Locust is not a
          project dependency: it is installed into a virtual environment of its own under
          `$DSV4_QUAL_CACHE` (default ~/.cache/dsv4-qual), reused when present.

What is measured, from outside each client, the same way for all three: a sampler reads
the client process tree's CPU time (/proc/<pid>/stat) and the bytes the stub has written
(/proc/<stub pid>/io) every `--sample-interval` seconds. The closed loop (a client sends
its next request only when it has read a reply) makes the stub's writes follow the
client's reading, so the steady-state window is where the stub has written from 10% to
90% of the run's bytes: 80% of the run's tokens. In that window:

- tok/s:       streamed tokens per second of wall time;
- CPU s:       the client's CPU seconds (user + system, all its processes);
- tok/CPU-s:   streamed tokens per client CPU-second, i.e. per core: the headline.

Beside it, the whole run (process start to exit: interpreter start-up, imports, the
readiness wait, the reports after the run) from getrusage(RUSAGE_CHILDREN) around each
client: its CPU seconds and tokens per CPU-second. Every client imports compiled
modules: locust's from its installed environment, this project's two trees from a
bytecode cache in the benchmark's temporary directory, filled by one short untimed run
of each before the first round (`compiled_env`). The stub's CPU in the window is shown
as a share of the client's (the stub must not be the bottleneck), and `others` is how
many cores' worth every other process on the machine used in the window (the machine's
load while measuring; the sampler itself is left out).

    python benchmarks/bench_stream_tokens.py [--requests 2500] [--repeats 5] [--tokens 1024]
        [--concurrency 64] [--stub-core 0] [--client-core 1] [--before cd31672]
        [--clients after,before,locust] [--locust-read chunks|iter-lines]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from loadgen.bench.client import BENCH_SCENARIO, start_stub

REPO = Path(__file__).resolve().parent.parent
LOCUST_VERSION = "2.47.0"
CLIENTS = ("after", "before", "locust")
TICK_S = os.sysconf("SC_CLK_TCK")

LOCUSTFILE = '''
"""A minimal streaming chat-completions client: read the SSE stream, count its tokens."""
import json
import os

import gevent
from locust import FastHttpUser, events, task
from locust.exception import StopUser

REQUESTS = int(os.environ["BENCH_REQUESTS"])
RESULT = os.environ["BENCH_RESULT"]
BODY = {
    "model": "bench-stub",
    "messages": [{"role": "user", "content": "Upgrade account XEHM4B to the business plan."}],
    "max_tokens": int(os.environ["BENCH_TOKENS"]),
    "stream": True,
    "stream_options": {"include_usage": True},
}
TOKEN_FIELDS = ("content", "reasoning", "reasoning_content", "tool_calls")
READ = os.environ.get("BENCH_LOCUST_READ", "chunks")
state = {"started": 0, "done": 0, "tokens": 0, "failed": 0}


def _lines(chunks):
    """64 KB reads split into lines, as bytes."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        lines = buf.split(b"\\n")
        buf = lines.pop()
        yield from lines


def count_tokens(lines, data, done):
    """Token-carrying chunks and the usage of one SSE stream (lines as bytes or str)."""
    tokens = 0
    usage = None
    for line in lines:
        if not line.startswith(data) or line == done:
            continue
        event = json.loads(line[6:])
        choices = event.get("choices")
        if choices:
            delta = choices[0].get("delta") or {}
            if any(delta.get(k) for k in TOKEN_FIELDS):
                tokens += 1
        if event.get("usage"):
            usage = event["usage"]
    return tokens, usage


@events.quitting.add_listener
def _write(environment, **kwargs):
    with open(RESULT, "w") as fh:
        json.dump(state, fh)


class StreamingUser(FastHttpUser):
    @task
    def chat(self):
        if state["started"] >= REQUESTS:
            raise StopUser()
        state["started"] += 1
        if READ == "iter-lines":  # locust's own helper: 1 KB reads, decoded, str lines
            lines = self.client.iter_lines("/v1/chat/completions", method="POST", json=BODY)
            tokens, usage = count_tokens(lines, "data: ", "data: [DONE]")
            ok = usage is not None and usage.get("completion_tokens") == tokens
        else:
            with self.client.post("/v1/chat/completions", json=BODY, stream=True,
                                  catch_response=True) as resp:
                chunks = resp.iter_content(chunk_size=65536, decode_content=False)
                tokens, usage = count_tokens(_lines(chunks), b"data: ", b"data: [DONE]")
                ok = usage is not None and usage.get("completion_tokens") == tokens
                if ok:
                    resp.success()
                else:
                    resp.failure(f"{tokens} token chunks, usage {usage}")
        state["failed"] += not ok
        state["done"] += 1
        state["tokens"] += tokens
        if state["done"] >= REQUESTS:
            gevent.spawn(self.environment.runner.quit)
'''


@dataclass
class Run:
    client: str
    round: int
    requests: int
    tokens: int
    wall_s: float  # process start to exit
    cpu_s: float  # whole run, the client's process tree
    window_wall_s: float
    window_cpu_s: float
    window_stub_cpu_s: float
    window_others_cpu_s: float  # every other process on the machine
    window_tokens: float
    check: str  # what the client itself counted (verdicts, tokens)

    @property
    def tok_per_s(self) -> float:
        return self.window_tokens / self.window_wall_s

    @property
    def tok_per_cpu_s(self) -> float:
        return self.window_tokens / self.window_cpu_s

    @property
    def others_cores(self) -> float:
        """How many cores' worth the machine's other processes used in the window."""
        return self.window_others_cpu_s / self.window_wall_s

    @property
    def whole_tok_per_cpu_s(self) -> float:
        return self.requests * self.tokens / self.cpu_s


def cache_root() -> Path:
    return Path(os.environ.get("DSV4_QUAL_CACHE") or Path.home() / ".cache" / "dsv4-qual")


def locust_python(version: str) -> Path:
    """The interpreter of a venv with locust `version`, built once under the cache."""
    venv = cache_root() / f"locust-{version}-py{sys.version_info[0]}.{sys.version_info[1]}"
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.is_file() and python.is_file():
        print(f"locust {version}: reusing the venv at {venv}", flush=True)
        return python
    print(f"locust {version}: installing into a venv of its own at {venv} "
          "(not a project dependency)", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    for cmd in ([sys.executable, "-m", "venv", str(venv)],
                [str(python), "-m", "pip", "install", "-q", f"locust=={version}"]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    marker.write_text(version + "\n")
    return python


def add_before_tree(commit: str, parent: Path) -> Path:
    path = parent / f"before-{commit}"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit],
                   check=True, capture_output=True, text=True)
    return path


def remove_before_tree(path: Path) -> None:
    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
                   capture_output=True)
    subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)


def imported_from(tree: Path) -> Path:
    """Where `python -m loadgen` run in `tree` imports the package from (must be `tree`)."""
    out = subprocess.run([sys.executable, "-c", "import loadgen; print(loadgen.__file__)"],
                         cwd=tree, check=True, capture_output=True, text=True)
    where = Path(out.stdout.strip()).resolve().parent.parent
    if where != tree.resolve():
        raise SystemExit(f"python in {tree} imports loadgen from {where}")
    return where


def _proc_cpu_s(pid: int) -> float | None:
    """utime + stime of `pid` and of its reaped children, in seconds."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return sum(int(x) for x in fields[11:15]) / TICK_S


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    if int(fh.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        kids.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return kids


def _wchar(pid: int) -> int:
    with open(f"/proc/{pid}/io", "rb") as fh:
        for line in fh:
            if line.startswith(b"wchar:"):
                return int(line.split()[1])
    raise RuntimeError("no wchar")


def _machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat)."""
    with open("/proc/stat", "rb") as fh:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (
            int(x) for x in fh.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICK_S


class Sample(NamedTuple):
    t: float
    stub_bytes: int  # what the stub has written so far
    stub_cpu: float
    client_cpu: float  # the client's process tree
    busy: float  # all cores
    me: float  # this script (the sampler)


class Sampler:
    """Samples the stub's bytes and CPU, the client's CPU, the machine's, until the client exits."""

    def __init__(self, stub_pid: int, interval: float) -> None:
        self.stub_pid = stub_pid
        self.interval = interval
        self.samples: list[Sample] = []

    def watch(self, proc: subprocess.Popen) -> None:
        tree: dict[int, float] = {}
        next_scan = 0.0
        me = os.getpid()
        while proc.poll() is None:
            now = time.monotonic()
            if now >= next_scan:  # new descendants (a client may fork workers)
                for pid in list(tree) or [proc.pid]:
                    for kid in _children(pid):
                        tree.setdefault(kid, 0.0)
                tree.setdefault(proc.pid, 0.0)
                next_scan = now + 0.5
            for pid in list(tree):
                cpu = _proc_cpu_s(pid)
                if cpu is not None:
                    tree[pid] = max(tree[pid], cpu)
                elif pid != proc.pid:  # reaped: its time is in its parent's cutime now
                    del tree[pid]
            self.samples.append(Sample(time.monotonic(), _wchar(self.stub_pid),
                                       _proc_cpu_s(self.stub_pid) or 0.0, sum(tree.values()),
                                       _machine_busy_s(), _proc_cpu_s(me) or 0.0))
            time.sleep(self.interval)

    def window(self, lo: float = 0.10, hi: float = 0.90) -> Sample:
        """Each figure's change between the stub's `lo` and `hi` share of the run's bytes."""
        s = self.samples
        w0, w1 = s[0].stub_bytes, s[-1].stub_bytes
        total = w1 - w0
        if total <= 0 or len(s) < 10:
            raise RuntimeError("the stub wrote nothing while the client ran")

        def at(share: float) -> list[float]:
            target = w0 + share * total
            for a, b in itertools.pairwise(s):
                if a.stub_bytes <= target <= b.stub_bytes and b.stub_bytes > a.stub_bytes:
                    f = (target - a.stub_bytes) / (b.stub_bytes - a.stub_bytes)
                    return [x + f * (y - x) for x, y in zip(a, b, strict=True)]
            raise RuntimeError("no sample spans the share")

        return Sample(*(y - x for x, y in zip(at(lo), at(hi), strict=True)))


def compiled_env(tmp: Path) -> dict[str, str]:
    """The environment of this project's clients: their modules read compiled, from a
    cache of the run's own (`warm_up` fills it), as an installed package's and locust's
    are. Without it, a machine that writes no bytecode (PYTHONDONTWRITEBYTECODE) makes a
    client run from a source tree compile every module it imports on every run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "bytecode")
    return env


def warm_up(client: str, args: argparse.Namespace, url: str, stub_pid: int,
            trees: dict[str, Path], tmp: Path) -> None:
    """One short untimed run of a tree's client, which compiles every module it imports
    into the cache `compiled_env` names."""
    short = argparse.Namespace(**{**vars(args), "requests": 20 * args.concurrency})
    run_one(client, 0, short, url, stub_pid, trees, None, tmp)


def _pin(core: int):
    return lambda: os.sched_setaffinity(0, {core})


def run_one(client: str, rnd: int, args: argparse.Namespace, url: str, stub_pid: int,
            trees: dict[str, Path], locust_py: Path | None, tmp: Path) -> Run:
    work = Path(tempfile.mkdtemp(prefix=f"{client}-", dir=tmp))
    if client == "locust":
        assert locust_py is not None
        (work / "locustfile.py").write_text(LOCUSTFILE)
        result = work / "result.json"
        cmd = [str(locust_py), "-m", "locust", "-f", str(work / "locustfile.py"), "--headless",
               "-u", str(args.concurrency), "-r", str(args.concurrency), "--host", url,
               "--only-summary", "--loglevel", "WARNING", "-t", "900s", "--stop-timeout", "5"]
        env = os.environ | {"BENCH_REQUESTS": str(args.requests), "BENCH_RESULT": str(result),
                            "BENCH_TOKENS": str(args.tokens), "BENCH_LOCUST_READ": args.locust_read}
        cwd = work
    else:
        scenario = work / "bench.toml"
        scenario.write_text(BENCH_SCENARIO.format(concurrency=args.concurrency,
                                                  requests=args.requests, tokens=args.tokens))
        cmd = [sys.executable, "-m", "loadgen", "run", str(scenario), "--base-url", url,
               "--out", str(work / "out"), "--quiet"]
        env = compiled_env(tmp)
        cwd = trees[client]
    sampler = Sampler(stub_pid, args.sample_interval)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    log = work / "client.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, preexec_fn=_pin(args.client_core),
                                stdout=fh, stderr=subprocess.STDOUT)
        sampler.watch(proc)
        proc.wait()
    output = log.read_text(errors="replace")
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    win = sampler.window()

    expected = args.requests * args.tokens
    if client == "locust":
        if not result.exists():
            raise RuntimeError(f"locust wrote no result (exit {proc.returncode}):\n"
                               f"{output[-3000:]}")
        state = json.loads(result.read_text())
        if state["done"] != args.requests or state["tokens"] != expected or state["failed"]:
            raise RuntimeError(f"locust counted {state}, expected {args.requests} replies of "
                               f"{args.tokens} tokens:\n{output[-3000:]}")
        check = f"{state['done']} replies, {state['tokens']} tokens counted"
    else:
        summary_path = work / "out" / "summary.json"
        if proc.returncode not in (0, 1) or not summary_path.exists():
            raise RuntimeError(f"{client} exited {proc.returncode}:\n{output[-3000:]}")
        phase = json.loads(summary_path.read_text())["phases"]["measurement"]
        if phase["requests"] != args.requests or phase["tokens"]["completion"] != expected:
            raise RuntimeError(f"{client}: {phase['requests']} requests, "
                               f"{phase['tokens']['completion']} tokens")
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(phase["verdicts"].items()))
        check = f"exit {proc.returncode}; {verdicts}"
    shutil.rmtree(work, ignore_errors=True)
    others = win.busy - win.client_cpu - win.stub_cpu - win.me
    return Run(client, rnd, args.requests, args.tokens, wall, cpu, win.t, win.client_cpu,
               win.stub_cpu, max(0.0, others), 0.8 * expected, check)


def ratio_line(name: str, num: list[float], den: list[float]) -> str:
    pairs = [a / b for a, b in zip(num, den, strict=True)]
    return (f"{name:<14} " + ", ".join(f"{p:.2f}" for p in pairs)
            + f"  (median {statistics.median(pairs):.2f})")


def report(runs: list[Run], clients: list[str]) -> str:
    head = (f"{'round':>5} {'client':<7} {'tok/s':>8} {'CPU s':>6} {'tok/CPU-s':>10} "
            f"{'stub CPU':>8} {'others':>6} {'whole: wall s':>13} {'CPU s':>6} "
            f"{'tok/CPU-s':>10}  check")
    lines = [head, "-" * len(head)]
    for r in runs:
        lines.append(
            f"{r.round:>5} {r.client:<7} {r.tok_per_s:>8.0f} {r.window_cpu_s:>6.2f} "
            f"{r.tok_per_cpu_s:>10.0f} {r.window_stub_cpu_s / r.window_cpu_s:>8.0%} "
            f"{r.others_cores:>6.2f} {r.wall_s:>13.1f} {r.cpu_s:>6.2f} "
            f"{r.whole_tok_per_cpu_s:>10.0f}  {r.check}")
    lines += ["", "medians (tok/s and tok/CPU-s in the steady-state window; the whole run beside;"
              " requests: the same divided by the tokens of a reply)",
              f"{'client':<7} {'tok/s':>8} {'tok/CPU-s':>10} {'whole tok/CPU-s':>16} "
              f"{'req/s':>7} {'req/CPU-s':>10} {'CPU ms/req':>10}"]
    by = {c: [r for r in runs if r.client == c] for c in clients}
    for c in clients:
        rs = by[c]
        per_cpu = statistics.median(r.tok_per_cpu_s for r in rs)
        tokens = rs[0].tokens
        lines.append(f"{c:<7} {statistics.median(r.tok_per_s for r in rs):>8.0f} "
                     f"{per_cpu:>10.0f} "
                     f"{statistics.median(r.whole_tok_per_cpu_s for r in rs):>16.0f} "
                     f"{statistics.median(r.tok_per_s for r in rs) / tokens:>7.0f} "
                     f"{per_cpu / tokens:>10.0f} {1000 * tokens / per_cpu:>10.3f}")
    lines += ["", "ratios of tok/CPU-s, round by round (the window; the whole run)"]
    for other in ("before", "locust"):
        if "after" in by and other in by:
            a, o = by["after"], by[other]
            lines.append(ratio_line(f"after/{other}", [r.tok_per_cpu_s for r in a],
                                    [r.tok_per_cpu_s for r in o]))
            lines.append(ratio_line("  whole run", [r.whole_tok_per_cpu_s for r in a],
                                    [r.whole_tok_per_cpu_s for r in o]))
    others = sorted(r.others_cores for r in runs)
    lines += ["", f"other processes in the windows: {statistics.median(others):.2f} cores "
                  f"(median; {others[0]:.2f}-{others[-1]:.2f}) of {os.cpu_count()}"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=2500, help="requests per client run")
    ap.add_argument("--repeats", type=int, default=5, help="rounds; each runs every client once")
    ap.add_argument("--tokens", type=int, default=1024, help="streamed tokens per reply")
    ap.add_argument("--concurrency", type=int, default=64, help="requests (users) in flight")
    ap.add_argument("--stub-core", type=int, default=0, help="the stub's core (and this script's)")
    ap.add_argument("--client-core", type=int, default=1, help="every client's core")
    ap.add_argument("--before", default="cd31672", help="the commit measured as 'before'")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="which clients, comma-separated (after, before, locust)")
    ap.add_argument("--locust-version", default=LOCUST_VERSION)
    ap.add_argument("--locust-read", choices=("chunks", "iter-lines"), default="chunks",
                    help="how locust reads the stream: 64 KB reads split into byte lines, or "
                         "its own iter_lines helper (1 KB reads, decoded to str)")
    ap.add_argument("--sample-interval", type=float, default=0.01, help="seconds")
    args = ap.parse_args()
    if args.tokens < 9:  # the stub's reply: reasoning, a tool call, 7 argument pieces
        ap.error("--tokens: at least 9")
    if args.requests < 20 * args.concurrency:
        # The stub writes `concurrency` replies before a client has read one: with fewer
        # requests the window starts before the clients' first replies (and a client's
        # one-off warm-up on them) are done.
        print(f"warning: {args.requests} requests < 20 x concurrency: the steady-state "
              "window is short and includes the start", file=sys.stderr)
    clients = [c for c in args.clients.split(",") if c]
    if not set(clients) <= set(CLIENTS):
        ap.error(f"--clients: one or more of {', '.join(CLIENTS)}")

    locust_py = locust_python(args.locust_version) if "locust" in clients else None
    # This script samples at 100 Hz: keep it on the stub's core, off the client's.
    os.sched_setaffinity(0, {args.stub_core})
    tmp = Path(tempfile.mkdtemp(prefix="dsv4-qual-stream-"))
    trees = {"after": REPO}
    stub = None
    try:
        if "before" in clients:
            trees["before"] = add_before_tree(args.before, tmp)
        for c in ("after", "before"):
            if c in trees:
                imported_from(trees[c])
        stub, url = start_stub(args.tokens, 0.0, [args.stub_core])
        print(f"stub on core {args.stub_core}, clients on core {args.client_core}; "
              f"{args.requests} requests of {args.tokens} tokens at {args.concurrency} in flight, "
              f"{args.repeats} rounds; load average {os.getloadavg()[0]:.2f}", flush=True)
        for client in ("after", "before"):
            if client in clients:
                warm_up(client, args, url, stub.pid, trees, tmp)
        runs = []
        for rnd in range(1, args.repeats + 1):
            order = clients[rnd - 1:] + clients[:rnd - 1]  # rotate who goes first
            for client in order:
                r = run_one(client, rnd, args, url, stub.pid, trees, locust_py, tmp)
                print(f"round {rnd} {client:<7} {r.tok_per_cpu_s:>8.0f} tok/CPU-s, "
                      f"{r.tok_per_s:>7.0f} tok/s ({r.check}); other processes "
                      f"{r.others_cores:.2f} cores", flush=True)
                runs.append(r)
        print()
        print(report(runs, clients))
    finally:
        if stub is not None:
            stub.terminate()
            stub.wait(timeout=10)
        if "before" in trees:
            remove_before_tree(trees["before"])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
