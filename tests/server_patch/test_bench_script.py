"""The kernel benchmark is GPU only and says so instead of failing obscurely."""

from __future__ import annotations

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
