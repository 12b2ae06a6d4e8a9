"""The receipt's `model` section: which process loaded the model, and its C128A builders."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from server_patch import model_watch, plugin
from server_patch.receipts import load_receipts


def _load_model(architectures: list[str], model_type: str, *, ratios: list[int] | None = None,
                parallel: SimpleNamespace | None = None) -> None:
    loader = importlib.import_module("vllm.model_executor.model_loader.base_loader")
    hf_config = SimpleNamespace(architectures=architectures, model_type=model_type)
    if ratios is not None:
        hf_config.compress_ratios = ratios
    model_config = SimpleNamespace(model="deepseek-ai/some-model", revision="abc123",
                                   hf_config=hf_config)
    loader.BaseModelLoader().load_model(
        vllm_config=SimpleNamespace(parallel_config=parallel), model_config=model_config)


def _builder(compress_ratio: int) -> object:
    module = importlib.import_module("vllm.models.deepseek_v4.sparse_mla")
    return module.DeepseekV4FlashMLAMetadataBuilder(compress_ratio, max_model_len=70000)


@pytest.fixture
def receipts(fake_vllm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    fake_vllm(version="0.28.0", upstream="capacity")
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path / "r"))

    def read() -> dict:
        (receipt,) = load_receipts(tmp_path / "r")
        return receipt["model"]

    return read


def test_a_process_that_never_loads_a_model_says_so(receipts) -> None:
    plugin.register()
    section = receipts()
    assert section["loaded"] is False and section["c128a_builders"] == 0
    assert section["hooks"] == {"model_loader": "ok", "c128a_builders": "ok"}


def test_the_model_process_records_its_model_and_c128a_builders(receipts) -> None:
    plugin.register()
    _load_model(["DeepseekV4ForCausalLM"], "deepseek_v4")
    for ratio in (4, 128, 128, 1):  # C4A, two C128A groups, SWA
        _builder(ratio)
    section = receipts()
    assert section["loaded"] is True
    assert section["architectures"] == ["DeepseekV4ForCausalLM"]
    assert section["model_type"] == "deepseek_v4"
    assert section["c128a_builders"] == 2 and section["c128a_widths"] == [547]


def test_a_model_without_c128a_layers_loads_and_makes_none(receipts) -> None:
    plugin.register()
    _load_model(["DeepseekV41ForCausalLM"], "deepseek_v41")
    section = receipts()
    assert section["loaded"] is True and section["c128a_builders"] == 0


def test_hooks_are_installed_once_whatever_the_registrations(receipts) -> None:
    for _ in range(3):
        plugin.register()
    _builder(128)
    assert receipts()["c128a_builders"] == 1


def test_the_hooks_are_installed_under_layout_off_too(receipts, monkeypatch) -> None:
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", "off")
    plugin.register()
    _load_model(["DeepseekV4ForCausalLM"], "deepseek_v4")
    _builder(128)
    section = receipts()
    assert section["loaded"] is True and section["c128a_builders"] == 1


def test_a_vllm_without_the_loader_says_which_hook_is_missing(fake_vllm, monkeypatch,
                                                              tmp_path: Path) -> None:
    fake_vllm(version="0.28.0", upstream="capacity", with_loader=False)
    monkeypatch.setenv("DSV4_QUAL_RECEIPT_DIR", str(tmp_path / "r"))
    plugin.register()  # never fatal: the gate, not the server, refuses what it cannot see
    (receipt,) = load_receipts(tmp_path / "r")
    hooks = receipt["model"]["hooks"]
    assert hooks["c128a_builders"] == "ok"
    assert hooks["model_loader"].startswith("cannot hook vllm.model_executor.model_loader")


def test_only_classes_that_build_c128a_metadata_themselves_are_hooked(fake_vllm) -> None:
    fake_vllm(version="0.28.0", upstream="capacity")
    module = importlib.import_module("vllm.models.deepseek_v4.sparse_mla")
    assert [c.__name__ for c in model_watch.c128a_builder_classes(module)] == [
        "DeepseekV4SparseMLAMetadataBuilder"]


def test_a_drafter_loaded_after_the_model_adds_to_what_the_receipt_says(receipts) -> None:
    # DeepSeek-V4 with its MTP drafter in the same worker: vLLM rewrites the drafter's
    # architectures and model type, and loads it second. The target model stays named.
    plugin.register()
    place = SimpleNamespace(data_parallel_size=4, data_parallel_size_local=2,
                            data_parallel_rank=3, data_parallel_index=3,
                            data_parallel_external_lb=False, data_parallel_hybrid_lb=False,
                            world_size=2, rank=1, tensor_parallel_size=2,
                            pipeline_parallel_size=1, nnodes=1, node_rank=0)
    _load_model(["DeepseekV4ForCausalLM"], "deepseek_v4", ratios=[0, 4, 128, 4], parallel=place)
    _load_model(["DeepSeekV4MTPModel"], "deepseek_mtp", parallel=SimpleNamespace(world_size=1))
    section = receipts()
    assert section["architectures"] == ["DeepseekV4ForCausalLM", "DeepSeekV4MTPModel"]
    assert section["model_type"] == "deepseek_v4" and section["revision"] == "abc123"
    assert section["compress_ratios"] == [0, 4, 128]
    assert [load["model_type"] for load in section["loads"]] == ["deepseek_v4", "deepseek_mtp"]
    assert section["parallel"]["data_parallel_index"] == 3
    assert (section["parallel"]["world_size"], section["parallel"]["rank"]) == (2, 1)


def test_a_config_without_compress_ratios_says_so(receipts) -> None:
    plugin.register()
    _load_model(["Qwen3ForCausalLM"], "qwen3")
    section = receipts()
    assert section["compress_ratios"] is None and section["parallel"] is None


def test_the_model_process_records_its_gpu_and_driver(receipts, monkeypatch) -> None:
    """Name and UUID from torch, the driver from NVML: what the history's GPU columns read."""
    import sys

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: SimpleNamespace(name="NVIDIA H200", uuid="GPU-1234"))
    nvml = SimpleNamespace(nvmlInit=lambda: None, nvmlShutdown=lambda: None,
                           nvmlSystemGetDriverVersion=lambda: b"570.133.20")
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    plugin.register()
    _load_model(["DeepseekV4ForCausalLM"], "deepseek_v4")
    assert receipts()["device"] == {"name": "NVIDIA H200", "uuid": "GPU-1234",
                                    "driver": "570.133.20"}


def test_a_process_without_cuda_records_no_device(receipts) -> None:
    plugin.register()
    _load_model(["DeepseekV4ForCausalLM"], "deepseek_v4")
    assert receipts()["device"] is None  # the CPU: nothing to say, nothing guessed
