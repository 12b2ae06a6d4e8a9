"""The benchmarks: the kernel ones are GPU only and say so; the guard one runs on a CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_benchmark_exits_2_with_a_clear_message_without_cuda(repo_root):
    env = dict(os.environ, PYTHONPATH=str(repo_root))
    result = subprocess.run(
        [sys.executable, str(repo_root / "benchmarks" / "bench_c128a.py"), "--requests", "1"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("bench_c128a: needs a CUDA GPU")
    assert "Traceback" not in result.stderr


def test_guard_benchmark_prints_both_rates_side_by_side_on_the_cpu(repo_root, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(repo_root))
    out = tmp_path / "bench_guard.json"
    result = subprocess.run(
        [sys.executable, str(repo_root / "benchmarks" / "bench_guard.py"), "--device", "cpu",
         "--requests", "2", "--capacity", "256", "--width", "128", "--trials", "3",
         "--trial-s", "0.02", "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "bare calls/s" in result.stdout and "guarded calls/s" in result.stdout
    assert "guard alone" in result.stdout and "flush" in result.stdout
    rows = json.loads(out.read_text())["results"]
    assert [(r["device"], r["layout"]) for r in rows] == [
        ("cpu", "capacity"), ("cpu", "prefix"), ("cpu", "packed")]
    assert all(r["bare_calls_s"] > 0 and r["guarded_calls_s"] > 0 for r in rows)
    assert [r["violations_per_call"] for r in rows] == [0, 0, 1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_upstream_benchmark_parses_its_arguments_and_exits_2_without_cuda(repo_root):
    env = dict(os.environ, PYTHONPATH=str(repo_root))
    script = str(repo_root / "benchmarks" / "bench_c128a_upstream.py")
    usage = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True,
                           env=env, timeout=120)
    assert usage.returncode == 0
    assert "--upstream-cache" in usage.stdout and "--host-calls" in usage.stdout
    result = subprocess.run([sys.executable, script, "--requests", "1,8", "--capacities", "640"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("bench_c128a_upstream: needs a CUDA GPU")
    assert "Traceback" not in result.stderr
