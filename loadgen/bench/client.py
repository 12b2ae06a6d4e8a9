"""`dsv4-qual bench-client`: the load generator's own speed, against a fast stub.

The stub runs pinned to one core and the load generator to another, so the figures
are the client's cost per request with its real configuration (verdicts on, every
record written), not the stub's. Each configuration is run several times; the table
shows medians.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The bench scenario without its [workload] (a template: its three figures in braces).
BENCH_HEAD = """
name = "bench-client"
[target]
model = "bench-stub"
ready_timeout_s = 30
[load]
concurrency = {concurrency}
priming = 0
measurement = {requests}
first_token_timeout_s = 60
idle_timeout_s = 60
total_timeout_s = 900
[request]
max_tokens = {tokens}
[gate]
min_measured = 1
[telemetry]
scrape_interval_s = 0
"""
BENCH_SCENARIO = BENCH_HEAD + '[workload]\nkind = "tool-turn"\n'



@dataclass
class BenchResult:
    transport: str
    mode: str
    concurrency: int
    workers: int
    requests: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    ok: int

    @property
    def rps(self) -> float:
        return self.requests / self.wall_s

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_s * 1000 / self.requests


def _pin(cores: list[int]) -> None:
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cores))


def start_stub(tokens: int, interval: float, cores: list[int], shape: str = "tool"
               ) -> tuple[subprocess.Popen, str]:
    """The stub pinned to `cores`, replying in `shape` (`tool` call or `answer` prose)."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadgen.bench.stub", "0", str(tokens), str(interval),
         str(write_fd), shape],
        pass_fds=(write_fd,), preexec_fn=lambda: _pin(cores))
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        port = int(fh.readline())
    return proc, f"http://127.0.0.1:{port}"


def run_client_once(url: str, concurrency: int, requests: int, tokens: int, transport: str,
                    workers: int, cores: list[int], scenario: str = BENCH_SCENARIO
                    ) -> dict[str, Any]:
    """One measured client run in a fresh process pinned to `cores` (`scenario`: a
    template of the bench scenario, formatted with the three figures)."""
    with tempfile.TemporaryDirectory(prefix="dsv4-qual-bench-") as tmp:
        scenario_file = Path(tmp) / "bench.toml"
        scenario_file.write_text(scenario.format(concurrency=concurrency, requests=requests,
                                                 tokens=tokens))
        out = Path(tmp) / "out"
        proc = subprocess.run(
            [sys.executable, "-m", "loadgen.bench.client", "--child", str(scenario_file), url,
             str(out), transport, str(workers)],
            capture_output=True, text=True, preexec_fn=lambda: _pin(cores), timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"bench client failed: {proc.stderr[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


def _child(argv: list[str]) -> None:
    """Inside the pinned client process: run, then report wall/CPU/RSS as one JSON line."""
    from loadgen.commands.run import run_scenario
    from loadgen.scenario import load_scenario

    scenario_path, url, out, transport, workers = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    scenario = load_scenario(scenario_path).with_overrides(base_urls=[url])
    outcome = run_scenario(scenario, Path(out), quiet=True, transport=transport, echo=False,
                           workers=workers, html=False)
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = max(me.ru_maxrss, kids.ru_maxrss) / 1024
    phase = outcome.report.phase_summaries["measurement"]
    # The client's own CPU over its phases (self-monitoring), not start-up or reports.
    cpu = outcome.report.run.client.cpu_s
    process = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    print(json.dumps({"wall_s": phase.wall_s, "cpu_s": cpu, "peak_rss_mb": rss,
                      "requests": phase.requests, "ok": phase.verdicts.get("ok", 0),
                      "process_cpu_s": process}))


def bench(concurrencies: list[int], modes: list[str], transports: list[str],
          workers_list: list[int], requests: int, tokens: int, repeats: int,
          stub_cores: list[int], client_cores: list[int]) -> list[BenchResult]:
    results = []
    for mode in modes:
        interval = 0.0 if mode == "burst" else 0.002
        stub, url = start_stub(tokens, interval, stub_cores)
        try:
            for transport in transports:
                for workers in workers_list:
                    for c in concurrencies:
                        runs = [run_client_once(url, c, requests, tokens, transport, workers,
                                                client_cores) for _ in range(repeats)]
                        med = {k: statistics.median(r[k] for r in runs)
                               for k in ("wall_s", "cpu_s", "peak_rss_mb")}
                        results.append(BenchResult(
                            transport, mode, c, workers, requests, med["wall_s"], med["cpu_s"],
                            med["peak_rss_mb"], min(r["ok"] for r in runs)))
        finally:
            stub.terminate()
            stub.wait(timeout=10)
    return results


def render(results: list[BenchResult], tokens: int, client_cores: list[int]) -> str:
    head = (f"{'transport':<9} {'mode':<6} {'conc':>5} {'workers':>7} {'req/s':>8} "
            f"{'req/s/core':>10} {'tok/s':>9} {'cpu ms/req':>10} {'peak RSS MB':>11} {'ok':>6}")
    lines = [head, "-" * len(head)]
    for r in results:
        cores = max(1, min(r.workers, len(client_cores)))
        lines.append(
            f"{r.transport:<9} {r.mode:<6} {r.concurrency:>5} {r.workers:>7} {r.rps:>8.0f} "
            f"{r.rps / cores:>10.0f} {r.rps * tokens:>9.0f} {r.cpu_ms_per_request:>10.3f} "
            f"{r.peak_rss_mb:>11.1f} {r.ok:>6}")
    return "\n".join(lines)


def main_child() -> None:
    _child(sys.argv[2:])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        main_child()
    else:  # pragma: no cover - the CLI command is the entry
        raise SystemExit("use: dsv4-qual bench-client")
