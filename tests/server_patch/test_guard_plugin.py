"""The stride guard inside the plugin, against a fake vLLM (0.27.1's packed builder or ours).

Builds go through the fake module's own caller, by global name, as vLLM's
metadata builder does, on persistent buffers shared by every call.
"""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
import tomllib

import pytest
import torch

from server_patch import plugin
from server_patch.c128a import builder, qualified_name
from server_patch.guard import StrideViolationError
from server_patch.receipts import load_receipts

TARGET = "vllm.models.deepseek_v4.sparse_mla.build_c128a_topk_metadata"
CAPACITY = 32
ROWS = 64


def _target_module():
    return importlib.import_module("vllm.models.deepseek_v4.sparse_mla")


@pytest.fixture
def buffers():
    return (torch.full((ROWS, CAPACITY), -7, dtype=torch.int32),
            torch.zeros(ROWS, dtype=torch.int32),
            torch.full((ROWS, CAPACITY), -7, dtype=torch.int32))


def _build(case_factory, buffers, seed, width, **shape):
    case = case_factory(seed, capacity=CAPACITY, width=width, **shape)
    return case, _target_module()._build_c128a_metadata(
        case.positions, case.compress_ratio, case.num_decode_tokens, case.token_to_req_indices,
        case.block_table, case.block_size, case.slot_mapping, *buffers,
        max_compressed_tokens=width,
    )


def _guard_receipt(tmp_path) -> dict:
    (receipt,) = load_receipts(tmp_path)
    return receipt


def test_layout_off_guards_upstreams_packed_builder_and_reports_its_first_narrow_batch(
        fake_vllm, monkeypatch, tmp_path, case_factory, buffers):
    fake_vllm(version="0.27.1", upstream="packed")
    upstream = _target_module().build_c128a_topk_metadata
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", "off")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    monkeypatch.setenv("DSV4_QUAL_GUARD_FLUSH_S", "3600")  # only the violation flushes
    plugin.register()  # DSV4_QUAL_GUARD unset: the guard counts by default

    installed = _target_module().build_c128a_topk_metadata
    assert installed is not upstream and installed.__wrapped__ is upstream
    assert getattr(installed, plugin._MARK_UPSTREAM) is upstream
    assert installed.stride_guard is plugin._STATE.guard
    receipt = _guard_receipt(tmp_path)
    assert receipt["patched"] is False and receipt["installed"] == TARGET
    assert receipt["guard"] == {"mode": "1", "watching": TARGET, "calls": 0, "checked": 0,
                                "violations": 0, "first_violation": None}

    _build(case_factory, buffers, 1, CAPACITY)  # what capture sees: full width
    _build(case_factory, buffers, 2, CAPACITY)
    _build(case_factory, buffers, 3, 8, decode_reqs=1, tokens_per_req=1, prefill_tokens=1)
    assert _guard_receipt(tmp_path)["guard"]["calls"] == 0  # throttled: nothing to report
    _, (decode, _, _) = _build(case_factory, buffers, 4, 8)  # the first narrow batch

    guard = _guard_receipt(tmp_path)["guard"]  # written at once, no flush asked for
    assert (guard["calls"], guard["violations"]) == (4, 1)
    first = guard["first_violation"]
    assert first["call"] == 4 and first["builder"] == TARGET
    assert first["views"] == ["decode", "prefill"]
    assert (first["num_decode_tokens"], first["num_prefill_tokens"]) == (4, 2)
    assert first["max_compressed_tokens"] == 8
    assert first["decode_row_stride"] == decode.stride(0) == 8
    assert first["decode_buffer_row_stride"] == CAPACITY


@pytest.mark.parametrize("layout", ["capacity", "prefix", "packed"])
def test_our_layouts_under_the_guard_over_many_random_batches(
        layout, fake_vllm, monkeypatch, tmp_path, case_factory, buffers):
    fake_vllm(version="0.27.1", upstream="packed")
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", layout)
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    plugin.register()
    rng = random.Random(51318)
    first_narrow = None
    for call in range(1, 101):
        width = rng.choice([CAPACITY, rng.randint(1, CAPACITY - 1)])
        _build(case_factory, buffers, call, width, decode_reqs=rng.randint(1, 4),
               tokens_per_req=rng.randint(1, 3), prefill_tokens=rng.randint(0, 3))
        if first_narrow is None and width != CAPACITY:
            first_narrow = call
    plugin._STATE.guard.flush()
    guard = _guard_receipt(tmp_path)["guard"]
    assert guard["calls"] == 100 and guard["watching"] == qualified_name(builder(layout))
    if layout == "packed":
        assert guard["violations"] > 0
        assert guard["first_violation"]["call"] == first_narrow
    else:
        assert guard["violations"] == 0 and guard["first_violation"] is None


def test_guard_off_installs_the_builder_unwrapped_and_the_receipt_says_so(
        fake_vllm, monkeypatch, tmp_path, case_factory, buffers):
    fake_vllm(version="0.28.0")
    monkeypatch.setenv("DSV4_QUAL_GUARD", "0")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    plugin.register()
    installed = _target_module().build_c128a_topk_metadata
    assert not hasattr(installed, "stride_guard")
    _build(case_factory, buffers, 1, 8)
    guard = _guard_receipt(tmp_path)["guard"]
    assert guard["mode"] == "0" and guard["watching"] is None and guard["calls"] == 0


def test_strict_guard_stops_the_first_narrow_batch_of_a_packed_upstream(
        fake_vllm, monkeypatch, tmp_path, case_factory, buffers):
    fake_vllm(version="0.27.1", upstream="packed")
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", "off")
    monkeypatch.setenv("DSV4_QUAL_GUARD", "strict")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    plugin.register()
    _build(case_factory, buffers, 1, CAPACITY)
    with pytest.raises(StrideViolationError, match=r"^dsv4-qual: C128A stride violation"):
        _build(case_factory, buffers, 2, 16)
    receipt = _guard_receipt(tmp_path)  # written before raising
    assert receipt["guard"]["mode"] == "strict"
    assert receipt["guard"]["first_violation"]["call"] == 2


def test_an_unreadable_guard_setting_is_refused(fake_vllm, monkeypatch):
    fake_vllm()
    monkeypatch.setenv("DSV4_QUAL_GUARD", "strcit")
    with pytest.raises(plugin.FatalPluginError, match="DSV4_QUAL_GUARD"):
        plugin.register()


def test_registering_again_keeps_one_guard_and_counts_each_call_once(
        fake_vllm, monkeypatch, case_factory, buffers):
    fake_vllm(version="0.27.1", upstream="packed")
    plugin.register()
    plugin.register()
    guard = plugin._STATE.guard
    _build(case_factory, buffers, 1, 8)
    assert guard.snapshot()["calls"] == 1
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", "off")  # same guard, now on upstream's
    plugin.register()
    plugin.register()
    assert plugin._STATE.guard is guard
    _build(case_factory, buffers, 2, 8)
    snap = guard.snapshot()
    assert snap["calls"] == 2 and snap["violations"] == 1 and snap["watching"] == TARGET
    assert snap["first_violation"]["call"] == 2
    monkeypatch.setenv("DSV4_QUAL_GUARD", "strict")  # a new mode: a new guard
    plugin.register()
    assert plugin._STATE.guard is not guard
    assert _target_module().build_c128a_topk_metadata.stride_guard is plugin._STATE.guard


# --------------------------------------------------------------------------- a served process

SERVE = """
from vllm.plugins import load_general_plugins
load_general_plugins()
import torch
from vllm.models.deepseek_v4 import sparse_mla

buffers = (torch.zeros(64, 32, dtype=torch.int32), torch.zeros(64, dtype=torch.int32),
           torch.zeros(64, 32, dtype=torch.int32))
block_table = torch.zeros(4, 40, dtype=torch.int32)
for width in (32, 32, 8, 16, 8, 32):
    sparse_mla._build_c128a_metadata(
        torch.arange(6) * 300, 128, 4, torch.tensor([0, 0, 1, 1, 2, 2], dtype=torch.int32),
        block_table, 2, torch.arange(6), *buffers, max_compressed_tokens=width)
print("SERVED", getattr(sparse_mla.build_c128a_topk_metadata, "stride_guard", None) is not None)
"""


def test_a_served_packed_upstream_reports_every_count_at_exit(tmp_path, fake_vllm_writer,
                                                             repo_root):
    """Through the entry point, in its own process: the first violation, then the rest at exit."""
    root = fake_vllm_writer(tmp_path / "fake", version="0.27.1", upstream="packed")
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())
    ((name, value),) = project["project"]["entry-points"]["vllm.general_plugins"].items()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV4_QUAL_")}
    env.update(PYTHONPATH=os.pathsep.join([str(root), str(repo_root)]),
               FAKE_VLLM_GENERAL_PLUGINS=f"{name}={value}",
               DSV4_QUAL_RECEIPT_DIR=str(tmp_path / "receipts"),
               DSV4_QUAL_C128A_LAYOUT="off")
    result = subprocess.run([sys.executable, "-c", SERVE], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "SERVED True" in result.stdout
    assert "dsv4-qual: C128A stride violation at builder call 3" in result.stderr
    (receipt,) = load_receipts(tmp_path / "receipts")
    assert receipt["layout"] == "off" and receipt["upstream_variant"] == "packed"
    guard = receipt["guard"]
    assert (guard["calls"], guard["violations"]) == (6, 3)
    assert guard["first_violation"]["call"] == 3 and guard["watching"] == TARGET
