"""Which server start a process belongs to: made once per start, handed down, exported.

In-process tests check the rules (`resolve`, the command line's address, the gauge);
subprocess tests run a fake vLLM whose "API server" loads the plugin and starts a child
that loads it too, as vLLM's engine core and workers do: every receipt of one start
names one id, a second start names another, and an id left in the environment by
something else is never taken.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from server_patch import plugin, server_start
from server_patch.receipts import load_receipts

SERVER = textwrap.dedent("""
    import multiprocessing, os, sys

    def engine():  # an engine core / worker: a process the server starts, that runs the model
        from vllm.plugins import load_general_plugins
        load_general_plugins()  # (a forked child has them loaded already, as in vLLM)
        from vllm.model_executor.model_loader.base_loader import BaseModelLoader
        BaseModelLoader().load_model(vllm_config=None, model_config=None)

    if __name__ == "__main__":
        from vllm.plugins import load_general_plugins
        load_general_plugins()
        child = multiprocessing.get_context(sys.argv[1]).Process(target=engine)
        child.start()
        child.join()
        assert child.exitcode == 0, child.exitcode
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # what vLLM serves with several APIs
            from prometheus_client import CollectorRegistry, generate_latest, multiprocess
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            print(generate_latest(registry).decode())
""")


def _entry_point(repo_root: Path) -> str:
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())
    ((name, value),) = project["project"]["entry-points"]["vllm.general_plugins"].items()
    return f"{name}={value}"


def serve(tmp_path: Path, fake_vllm_writer, repo_root: Path, receipts: Path, *,
          start_method: str = "spawn", env: dict[str, str] | None = None,
          argv: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    root = tmp_path / "fake"
    if not root.exists():
        fake_vllm_writer(root)
    script = tmp_path / "serve.py"
    script.write_text(SERVER)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DSV4_QUAL_")}
    full_env.update(PYTHONPATH=os.pathsep.join([str(root), str(repo_root)]),
                    FAKE_VLLM_GENERAL_PLUGINS=_entry_point(repo_root),
                    DSV4_QUAL_RECEIPT_DIR=str(receipts), **(env or {}))
    result = subprocess.run([sys.executable, str(script), start_method, *argv], env=full_env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def ids_of(receipts: Path) -> dict[int, dict]:
    return {r["pid"]: r["server"] for r in load_receipts(receipts)}


@pytest.mark.slow  # a fake vLLM server and its child processes
@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_every_process_of_one_start_names_the_id_its_first_process_made(
        tmp_path: Path, fake_vllm_writer, repo_root: Path, start_method: str) -> None:
    serve(tmp_path, fake_vllm_writer, repo_root, tmp_path / "r", start_method=start_method)
    servers = ids_of(tmp_path / "r")
    assert len(servers) == 2  # the server and the process it started
    assert len({s["id"] for s in servers.values()}) == 1
    (maker,) = [pid for pid, s in servers.items() if s["made_here"]]
    assert {s["maker_pid"] for s in servers.values()} == {maker}
    (child,) = [r for r in load_receipts(tmp_path / "r") if r["pid"] != maker]
    assert child["model"]["loaded"] is True


@pytest.mark.slow  # a fake vLLM server and its child processes
def test_a_restart_gets_a_new_id_and_never_takes_one_left_in_the_environment(
        tmp_path: Path, fake_vllm_writer, repo_root: Path) -> None:
    serve(tmp_path, fake_vllm_writer, repo_root, tmp_path / "first", start_method="fork")
    (first,) = [s for s in ids_of(tmp_path / "first").values() if s["made_here"]]
    # The restart runs in an environment that kept the first start's id (a container's,
    # or a node given another's id by hand): its maker is no ancestor, so it is not taken.
    left = {server_start.ENV_SERVER_ID: first["id"],
            server_start.ENV_SERVER_MAKER: f"{first['maker_pid']}:0",
            server_start.ENV_SERVER_ADDRESS: "gpu-a:8000"}
    serve(tmp_path, fake_vllm_writer, repo_root, tmp_path / "second", start_method="fork",
          env=left)
    second = list(ids_of(tmp_path / "second").values())
    assert len({s["id"] for s in second}) == 1 and second[0]["id"] != first["id"]
    (maker,) = [s for s in second if s["made_here"]]
    assert "not taken" in maker["note"] and "not an ancestor" in maker["note"]
    assert maker["address"] is None  # its own command line's, not the one left behind


@pytest.mark.slow  # a fake vLLM server and its child processes
def test_several_processes_writing_one_metrics_directory_show_the_id_once(
        tmp_path: Path, fake_vllm_writer, repo_root: Path) -> None:
    # vLLM with several API servers serves what every process wrote into its
    # PROMETHEUS_MULTIPROC_DIR: the gauge must come out as one sample of one start.
    metrics = tmp_path / "prom"
    metrics.mkdir()
    result = serve(tmp_path, fake_vllm_writer, repo_root, tmp_path / "r", start_method="fork",
                   env={"PROMETHEUS_MULTIPROC_DIR": str(metrics)})
    (server_id,) = {s["id"] for s in ids_of(tmp_path / "r").values()}
    lines = [x for x in result.stdout.splitlines() if x.startswith(server_start.METRIC + "{")]
    assert lines == [f'{server_start.METRIC}{{address="",server_id="{server_id}"}} 1.0']


def test_the_command_line_gives_the_address_served() -> None:
    address = server_start.address_from_argv
    assert address(["vllm", "serve", "m", "--port", "8001", "--host", "10.0.0.5"]) == \
        "10.0.0.5:8001"
    assert address(["vllm", "serve", "m", "--port=9000"]) == "0.0.0.0:9000"
    assert address(["python", "-m", "vllm.entrypoints.openai.api_server"]) == "0.0.0.0:8000"
    assert address(["vllm", "serve", "m", "--uds", "/run/v.sock"]) == "unix:/run/v.sock"
    # A headless node serves no API; a process that is no server has no address.
    assert address(["vllm", "serve", "m", "--headless", "--port", "8000"]) is None
    assert address(["python", "bench.py"]) is None


def test_resolve_makes_an_id_and_hands_it_down(monkeypatch: pytest.MonkeyPatch) -> None:
    environ: dict[str, str] = {}
    made = server_start.resolve(environ, ["vllm", "serve", "m", "--port", "8123"])
    assert made.made_here and made.address == "0.0.0.0:8123" and made.maker_pid == os.getpid()
    assert environ[server_start.ENV_SERVER_ID] == made.id
    assert environ[server_start.ENV_SERVER_MAKER].startswith(f"{os.getpid()}:")
    # The same process (or a child of it) asking again takes the id it handed down.
    again = server_start.resolve(dict(environ), ["anything"])
    assert (again.id, again.address, again.made_here) == (made.id, "0.0.0.0:8123", False)
    # A maker whose start time does not match is another process that reused the pid.
    pid, _ = environ[server_start.ENV_SERVER_MAKER].split(":")
    reused = {**environ, server_start.ENV_SERVER_MAKER: f"{pid}:1"}
    assert server_start.resolve(reused, []).id != made.id


def test_the_gauge_names_the_start_once_however_often_it_is_exported() -> None:
    import logging

    registry = CollectorRegistry()
    start = server_start.ServerStart("abc123", "0.0.0.0:8000", 1, made_here=True)
    log = logging.getLogger("test")
    assert server_start.export_metric(start, log, registry)
    assert server_start.export_metric(start, log, registry)
    text = generate_latest(registry).decode()
    samples = [x for x in text.splitlines() if x.startswith(server_start.METRIC + "{")]
    assert samples == [f'{server_start.METRIC}{{address="0.0.0.0:8000",server_id="abc123"}} 1.0']
    # The sim writes its /metrics by hand: the same sample.
    assert server_start.metric_lines(start)[-1] == (
        f'{server_start.METRIC}{{server_id="abc123",address="0.0.0.0:8000"}} 1')


def test_register_writes_the_start_into_the_receipt_and_on_metrics(
        fake_vllm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import prometheus_client

    fake_vllm(version="0.28.0", upstream="capacity")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path / "r"))
    plugin.register()
    (receipt,) = load_receipts(tmp_path / "r")
    start = server_start.current()
    assert receipt["server"] == json.loads(json.dumps(start.section()))
    assert os.environ[server_start.ENV_SERVER_ID] == start.id
    text = generate_latest(prometheus_client.REGISTRY).decode()
    assert f'server_id="{start.id}"' in text
