"""The kernel's warm-up: armed at plugin load, run when the process starts CUDA, never fatal."""

from __future__ import annotations

import logging

import pytest
import torch

from server_patch import plugin
from server_patch.c128a import warmup


@pytest.fixture
def lazy_calls(monkeypatch):
    """torch's queue of calls deferred to CUDA initialisation, recorded instead of queued."""
    queued: list = []
    monkeypatch.setattr(torch.cuda, "_lazy_call", queued.append)
    monkeypatch.setattr(warmup, "_armed", False)
    return queued


def test_the_warm_up_waits_for_cuda_and_is_armed_once_per_process(lazy_calls, monkeypatch):
    compiled = []
    pytest.importorskip("triton")
    from server_patch.c128a import kernel

    monkeypatch.setattr(kernel, "warm_up", lambda: compiled.append(1))
    assert warmup.warm_up_when_cuda_starts() is True
    assert warmup.warm_up_when_cuda_starts() is False
    assert len(lazy_calls) == 1 and compiled == []  # nothing runs before CUDA starts
    lazy_calls[0]()
    assert compiled == [1]


def test_a_failed_warm_up_is_logged_and_never_raised(monkeypatch, caplog):
    pytest.importorskip("triton")
    from server_patch.c128a import kernel

    def broken():
        raise RuntimeError("ptxas exploded")

    monkeypatch.setattr(kernel, "warm_up", broken)
    with caplog.at_level(logging.WARNING):
        assert warmup.warm_up_now() is False
    assert "compiles on first use instead" in caplog.text


@pytest.mark.parametrize("layout,armed", [("capacity", 1), ("prefix", 1), ("off", 0)])
def test_the_plugin_arms_the_warm_up_when_it_installs_our_kernel(
        layout, armed, fake_vllm, monkeypatch, lazy_calls):
    fake_vllm(version="0.32.0", upstream="capacity")
    monkeypatch.setenv("DSV4_QUAL_C128A_LAYOUT", layout)
    plugin.register()
    plugin.register()
    assert len(lazy_calls) == armed


def test_a_torch_that_cannot_queue_it_does_not_stop_the_plugin(monkeypatch, caplog):
    def missing(_call):
        raise AttributeError("no _lazy_call in this torch")

    monkeypatch.setattr(torch.cuda, "_lazy_call", missing)
    monkeypatch.setattr(warmup, "_armed", False)
    with caplog.at_level(logging.WARNING):
        assert warmup.warm_up_when_cuda_starts() is False
    assert "compiles on first use instead" in caplog.text
