"""The benchmarks: the kernel ones are GPU only and say so; the guard one runs on a CPU;
the GPU-host runner installs what a host lacks and runs every GPU step."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

#: Each test runs a benchmark script as its own process: the slow tier.
pytestmark = pytest.mark.slow


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


# ----------------------------------------------------------------- the GPU-host runner


def _runner(repo_root):
    spec = importlib.util.spec_from_file_location("run_on_gpu",
                                                  repo_root / "benchmarks" / "run_on_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wheel(folder: Path, name: str, source: str) -> Path:
    """A minimal pure-Python wheel holding one module, ``name``."""
    dist_info = f"{name}-0.1.dist-info"
    files = {
        f"{name}.py": source,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n",
    }
    files[f"{dist_info}/RECORD"] = "".join(f"{path},,\n" for path in files) + \
        f"{dist_info}/RECORD,,\n"
    path = folder / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for arcname, text in files.items():
            zf.writestr(arcname, text)
    return path


def test_runner_installs_what_the_host_lacks_from_the_wheels_it_is_given(repo_root, tmp_path):
    runner = _runner(repo_root)
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    _wheel(wheels, "dsv4_qual_probe_pkg", "import dsv4_qual_probe_dep\n")
    # The package's own dependency has no wheel yet: that one is reported missing.
    assert runner.install_missing(["dsv4_qual_probe_pkg"], wheels, site) == [
        "dsv4_qual_probe_dep"]
    _wheel(wheels, "dsv4_qual_probe_dep", "VALUE = 1\n")
    assert runner.install_missing(["dsv4_qual_probe_pkg"], wheels, site) == []
    assert runner.missing_modules(["dsv4_qual_probe_pkg"], [str(site)]) == []
    assert runner.install_missing(["dsv4_qual_probe_pkg"], None, tmp_path / "none") == [
        "dsv4_qual_probe_pkg"]


def test_runner_runs_every_gpu_marked_test_file_and_each_benchmark(repo_root, tmp_path):
    runner = _runner(repo_root)
    assert runner.gpu_test_files() == ["tests/server_patch/test_c128a_gpu.py",
                                       "tests/sim/test_sim_gpu.py"]
    commands = runner.step_commands(tmp_path, tmp_path / "cache", quick=True)
    assert list(commands) == list(runner.STEPS)
    # The project's addopts are cleared there: the GPU host has pytest, not the parallel
    # runner the fast tier's options ask for.
    assert commands["tests"][1:7] == ["-m", "pytest", "-o", "addopts=", "-m", "gpu"]
    assert ["--upstream-cache", str(tmp_path / "cache")] == commands["bench_c128a_upstream"][
        2 + len(runner.QUICK_ARGS):4 + len(runner.QUICK_ARGS)]
    for name in ("bench_c128a", "bench_c128a_upstream", "bench_guard"):
        script = commands[name][1]
        assert (repo_root / script).is_file()
        assert commands[name][-2:] == ["--json", str(tmp_path / f"{name}.json")]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_runner_exits_2_on_a_host_without_a_gpu(repo_root, tmp_path):
    result = subprocess.run(
        [sys.executable, str(repo_root / "benchmarks" / "run_on_gpu.py"), "--out",
         str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("run_on_gpu: torch sees no CUDA GPU")
    assert not (tmp_path / "out").exists()
