"""The vLLM plugin against a fake ``vllm`` package (the real one is tested elsewhere).

In-process tests check what ``register()`` patches and records; subprocess
tests check that strict mode really stops a process, even under a plugin
loader that swallows every ``Exception`` (vLLM's swallows import errors).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import torch

from server_patch import plugin
from server_patch.c128a import builder, qualified_name
from server_patch.receipts import load_receipts

TARGET = "vllm.models.deepseek_v4.sparse_mla.build_c128a_topk_metadata"
REQUIRED_RECEIPT_KEYS = {
    "schema", "tool", "tool_version", "layout", "patched", "strict", "vllm_version",
    "upstream_variant", "target", "installed", "pid", "process", "hostname", "time",
    "first_call",
}


def _target_module():
    return importlib.import_module("vllm.models.deepseek_v4.sparse_mla")


def _patch_log_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == plugin.logger.name and r.levelno == logging.INFO]


def _call_through_vllm(case_factory, width=8):
    """Build the way vLLM does: through the module's own caller, by global name."""
    case = case_factory(11, capacity=32, width=width)
    buffers = case.buffers()
    decode, _, prefill = _target_module()._build_c128a_metadata(
        case.positions, case.compress_ratio, case.num_decode_tokens, case.token_to_req_indices,
        case.block_table, case.block_size, case.slot_mapping, *buffers,
        max_compressed_tokens=width,
    )
    return case, buffers, decode, prefill


# ----------------------------------------------------------------------------- patching


def test_register_replaces_the_module_global_with_the_capacity_builder(fake_vllm, caplog,
                                                                      case_factory):
    fake_vllm(version="0.28.0", upstream="capacity")
    upstream = _target_module().build_c128a_topk_metadata
    caplog.set_level(logging.INFO)
    plugin.register()
    installed = _target_module().build_c128a_topk_metadata
    assert installed is not upstream
    assert qualified_name(installed) == qualified_name(builder("capacity"))
    assert installed.layout == "capacity"
    _, buffers, decode, prefill = _call_through_vllm(case_factory)
    assert decode.stride(0) == buffers[0].stride(0) and decode.shape[1] == 32
    assert prefill.stride(0) == buffers[2].stride(0) and prefill.shape[1] == 32
    (line,) = _patch_log_lines(caplog)
    assert line.startswith("dsv4-qual: patched " + TARGET)
    assert "0.28.0" in line and "capacity" in line


def test_register_fixes_a_packed_upstream(fake_vllm, case_factory):
    """The 0.27.x builder packs rows at the active width; after the patch they sit at capacity."""
    fake_vllm(version="0.27.1", upstream="packed")
    _, buffers, decode, _ = _call_through_vllm(case_factory)
    assert decode.stride(0) == 8 != buffers[0].stride(0)  # upstream 0.27.1: the bug
    plugin.register()
    _, buffers, decode, _ = _call_through_vllm(case_factory)
    assert decode.stride(0) == buffers[0].stride(0) == 32


@pytest.mark.parametrize("layout", ["prefix", "packed", "capacity"])
def test_layout_setting_picks_the_builder(layout, fake_vllm, monkeypatch, case_factory):
    fake_vllm(version="0.32.0")
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", layout)
    plugin.register()
    assert _target_module().build_c128a_topk_metadata.layout == layout
    _, _, decode, _ = _call_through_vllm(case_factory)
    assert decode.shape[1] == (32 if layout == "capacity" else 8)


def test_off_leaves_upstream_in_place_and_says_so(fake_vllm, monkeypatch, tmp_path):
    """With the guard off too, the module global is upstream's very function."""
    fake_vllm(version="0.27.1", upstream="packed")
    upstream = _target_module().build_c128a_topk_metadata
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", "off")
    monkeypatch.setenv("DSV4_QUAL_GUARD", "0")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    plugin.register()
    assert _target_module().build_c128a_topk_metadata is upstream
    (receipt,) = load_receipts(tmp_path)
    assert receipt["patched"] is False and receipt["layout"] == "off"
    assert receipt["installed"] == TARGET
    assert receipt["upstream_variant"] == "packed"


def test_off_after_a_patch_restores_upstream(fake_vllm, monkeypatch):
    fake_vllm()
    upstream = _target_module().build_c128a_topk_metadata
    monkeypatch.setenv("DSV4_QUAL_GUARD", "0")
    plugin.register()
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", "off")
    plugin.register()
    assert _target_module().build_c128a_topk_metadata is upstream


def test_register_is_idempotent(fake_vllm, monkeypatch, tmp_path, caplog):
    fake_vllm(version="0.27.1", upstream="packed")
    upstream = _target_module().build_c128a_topk_metadata
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    caplog.set_level(logging.INFO)
    plugin.register()
    first = _target_module().build_c128a_topk_metadata
    plugin.register()
    plugin.register()
    assert _target_module().build_c128a_topk_metadata is first
    assert getattr(first, plugin._MARK_UPSTREAM) is upstream  # never wraps itself
    assert len(_patch_log_lines(caplog)) == 1
    (receipt,) = load_receipts(tmp_path)
    assert receipt["registrations"] == 3 and receipt["patched"] is True
    # A layout change in between re-installs, still on top of the original upstream.
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", "prefix")
    plugin.register()
    second = _target_module().build_c128a_topk_metadata
    assert second.layout == "prefix" and getattr(second, plugin._MARK_UPSTREAM) is upstream
    assert len(_patch_log_lines(caplog)) == 2


# ----------------------------------------------------------------------------- receipts


def test_receipt_records_the_patch_and_then_the_first_call(fake_vllm, monkeypatch, tmp_path,
                                                          case_factory):
    fake_vllm(version="0.27.1", upstream="packed")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path / "receipts"))
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", "prefix")
    plugin.register()
    (path,) = (tmp_path / "receipts").glob("*.json")
    assert path.name.endswith(f"-{os.getpid()}.json")
    receipt = json.loads(path.read_text())
    assert set(receipt) >= REQUIRED_RECEIPT_KEYS
    assert receipt["schema"] == 1 and receipt["tool"] == "dsv4-qual"
    assert receipt["layout"] == "prefix" and receipt["patched"] is True
    assert receipt["strict"] is True and receipt["vllm_version"] == "0.27.1"
    assert receipt["upstream_variant"] == "packed"
    assert receipt["target"] == TARGET
    assert receipt["installed"] == qualified_name(builder("prefix"))
    assert receipt["pid"] == os.getpid() and receipt["first_call"] is None

    case, buffers, _, _ = _call_through_vllm(case_factory, width=16)
    _call_through_vllm(case_factory, width=8)  # only the first call is recorded
    first = json.loads(path.read_text())["first_call"]
    assert first["row_stride_decode"] == first["row_stride_prefill"] == 32
    assert first["width"] == 16
    assert first["decode_buffer_shape"] == list(buffers[0].shape)
    assert first["prefill_buffer_shape"] == list(buffers[2].shape)
    assert first["num_decode_tokens"] == case.num_decode_tokens
    assert first["num_prefill_tokens"] == case.num_prefill_tokens
    assert first["time"].endswith("Z")


def test_no_receipt_without_a_receipt_dir(fake_vllm, tmp_path, monkeypatch, case_factory):
    fake_vllm()
    monkeypatch.chdir(tmp_path)
    plugin.register()
    _call_through_vllm(case_factory)
    assert list(tmp_path.rglob("*.json")) == []


# ----------------------------------------------------------------------------- refusing


def test_strict_refuses_a_wrong_signature_with_a_system_exit(fake_vllm, monkeypatch, tmp_path):
    fake_vllm(version="0.28.0", upstream="wrong-signature")
    original = _target_module().build_c128a_topk_metadata
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as raised:
        plugin.register()
    assert not isinstance(raised.value, Exception)  # no `except Exception` can swallow it
    message = str(raised.value.code)
    assert message.startswith("dsv4-qual:") and "\n" not in message
    assert "actual_num_query_tokens" in message
    assert _target_module().build_c128a_topk_metadata is original
    (receipt,) = load_receipts(tmp_path)
    assert receipt["patched"] is False and receipt["error"] == message


@pytest.mark.parametrize(
    ("install", "env", "reason"),
    [
        ({"version": "0.25.1"}, {}, "not in the supported range"),
        ({"version": "0.28.0"}, {"DSV4_QUAL_SUPPORTED_VLLM": "==0.27.1"}, "0.28.0"),
        ({"with_target": False}, {}, "cannot import vllm.models.deepseek_v4.sparse_mla"),
        ({}, {"DSV4_QUAL_C128A_LAYOUT": "packd"}, "DSV4_QUAL_C128A_LAYOUT"),
    ],
)
def test_strict_refuses_what_it_cannot_vouch_for(install, env, reason, fake_vllm, monkeypatch):
    fake_vllm(**install)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(plugin.FatalPluginError, match=reason):
        plugin.register()


def test_relaxed_patches_an_unsupported_version_whose_signature_matches(fake_vllm, monkeypatch,
                                                                        tmp_path, caplog):
    fake_vllm(version="0.35.0")
    monkeypatch.setenv("DSV4_QUAL_STRICT", "0")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    plugin.register()
    assert _target_module().build_c128a_topk_metadata.layout == "capacity"
    (receipt,) = load_receipts(tmp_path)
    assert receipt["patched"] is True and receipt["strict"] is False
    assert receipt["upstream_variant"] == "unknown"
    assert any("0.35.0" in w for w in receipt["warnings"])
    assert "patching anyway" in caplog.text


def test_relaxed_never_replaces_a_function_it_does_not_understand(fake_vllm, monkeypatch,
                                                                  tmp_path):
    fake_vllm(upstream="wrong-signature")
    original = _target_module().build_c128a_topk_metadata
    monkeypatch.setenv("DSV4_QUAL_STRICT", "0")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path))
    plugin.register()
    assert _target_module().build_c128a_topk_metadata is original
    (receipt,) = load_receipts(tmp_path)
    assert receipt["patched"] is False and receipt["error"].startswith("dsv4-qual:")


# ----------------------------------------------------------------------------- entry point


def _entry_point(repo_root: Path) -> tuple[str, str]:
    project = tomllib.loads((repo_root / "pyproject.toml").read_text())
    ((name, value),) = project["project"]["entry-points"]["vllm.general_plugins"].items()
    return name, value


def test_entry_point_names_register(repo_root):
    name, value = _entry_point(repo_root)
    assert value == "server_patch.plugin:register"
    module, attr = value.split(":")
    assert getattr(importlib.import_module(module), attr) is plugin.register
    assert name == "dsv4_qual_c128a"


SERVE = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.models.deepseek_v4 import sparse_mla
fn = sparse_mla.build_c128a_topk_metadata
print("SERVING", getattr(fn, "layout", "upstream"))
"""


def _serve(tmp_path, fake_vllm_writer, repo_root, env, **fake):
    root = fake_vllm_writer(tmp_path / "fake", **fake)
    name, value = _entry_point(repo_root)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DSV4_QUAL_")}
    full_env.update(
        PYTHONPATH=os.pathsep.join([str(root), str(repo_root)]),
        FAKE_VLLM_GENERAL_PLUGINS=f"{name}={value}",
        DSV4_QUAL_RECEIPT_DIR=str(tmp_path / "receipts"),
        **env,
    )
    return subprocess.run([sys.executable, "-c", textwrap.dedent(SERVE)], env=full_env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("fake", "env"),
    [
        ({"version": "0.25.1"}, {}),
        ({"version": "0.28.0"}, {"DSV4_QUAL_SUPPORTED_VLLM": "<0.28"}),
        ({"upstream": "wrong-signature"}, {}),
    ],
)
def test_strict_mode_stops_the_process(fake, env, tmp_path, fake_vllm_writer, repo_root):
    result = _serve(tmp_path, fake_vllm_writer, repo_root, env, **fake)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "SERVING" not in result.stdout
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("dsv4-qual: ")
    (receipt,) = load_receipts(tmp_path / "receipts")
    assert receipt["patched"] is False and receipt["error"] == last_line


def test_relaxed_mode_keeps_the_process_serving(tmp_path, fake_vllm_writer, repo_root):
    result = _serve(tmp_path, fake_vllm_writer, repo_root, {"DSV4_QUAL_STRICT": "0"},
                    version="0.25.1")
    assert result.returncode == 0, result.stderr
    assert "SERVING capacity" in result.stdout
    assert "WARNING dsv4-qual:" in result.stderr


def test_a_supported_server_loads_the_plugin_and_serves_patched(tmp_path, fake_vllm_writer,
                                                                repo_root):
    result = _serve(tmp_path, fake_vllm_writer, repo_root, {}, version="0.27.1",
                    upstream="packed")
    assert result.returncode == 0, result.stderr
    assert "SERVING capacity" in result.stdout
    info = [line for line in result.stderr.splitlines() if line.startswith("INFO dsv4-qual:")]
    assert len(info) == 1
    (receipt,) = load_receipts(tmp_path / "receipts")
    assert receipt["patched"] is True and receipt["upstream_variant"] == "packed"
    assert receipt["pid"] != os.getpid()


def test_tensor_types_are_plain_torch(fake_vllm, case_factory):
    """The installed builder returns torch views into vLLM's persistent buffers."""
    fake_vllm()
    plugin.register()
    _, buffers, decode, prefill = _call_through_vllm(case_factory)
    assert isinstance(decode, torch.Tensor) and decode.data_ptr() == buffers[0].data_ptr()
    assert prefill.data_ptr() == buffers[2].data_ptr()
