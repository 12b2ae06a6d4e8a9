"""Where the guard's counts go: receipts (also at process exit) and Prometheus counters."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import prometheus_client
import pytest
import torch

from loadgen.targets.receipts import receipts_summary
from loadgen.targets.telemetry import parse_prometheus, tracked
from server_patch import guard_sinks
from server_patch.guard import StrideGuard
from server_patch.guard_sinks import prometheus_sink, receipt_sink, standard_sinks
from server_patch.receipts import Receipt, load_receipts, receipt_path

CAPACITY = 32

# A builder with upstream 0.27.x's packed views and no kernel: metadata only.
PACKED_LIKE = """
import torch

def packed_like(positions, compress_ratio, num_decode_tokens, token_to_req_indices,
                block_table, block_size, slot_mapping, global_decode_buffer,
                decode_lens_buffer, prefill_buffer, max_compressed_tokens=8192):
    n_pre = positions.shape[0] - num_decode_tokens
    w = max_compressed_tokens
    return (global_decode_buffer.as_strided((num_decode_tokens, w), (w, 1)),
            decode_lens_buffer[:num_decode_tokens],
            prefill_buffer.as_strided((n_pre, w), (w, 1)))

BUFFERS = (torch.zeros(64, 32, dtype=torch.int32), torch.zeros(64, dtype=torch.int32),
           torch.zeros(64, 32, dtype=torch.int32))

def call(build, width, n_dec=4, n_pre=2):
    build(torch.zeros(n_dec + n_pre, dtype=torch.int64), 128, n_dec, None, None, 2, None,
          *BUFFERS, max_compressed_tokens=width)
"""
namespace: dict = {}
exec(PACKED_LIKE, namespace)
packed_like, call = namespace["packed_like"], namespace["call"]


def _guard_section(path) -> dict:
    return json.loads(path.read_text())["guard"]


# --------------------------------------------------------------------------- receipts


def test_receipt_sink_writes_the_guard_section_the_loadgen_reads(tmp_path):
    receipt = Receipt(tmp_path, {"layout": "off", "patched": False})
    guard = StrideGuard(sinks=[receipt_sink(lambda: receipt)], flush_interval_s=3600)
    build = guard.wrap(packed_like)
    call(build, CAPACITY)
    call(build, 8)  # the first violation is flushed at once
    section = _guard_section(receipt.path)
    assert set(section) == {"mode", "watching", "calls", "checked", "violations",
                            "first_violation", "updated"}
    assert (section["mode"], section["calls"], section["violations"]) == ("1", 2, 1)
    assert section["watching"].endswith("packed_like")
    assert section["first_violation"]["call"] == 2
    assert section["updated"].endswith("Z")
    # The load generator's summary of receipts reads exactly these keys.
    summary = receipts_summary(load_receipts(tmp_path))
    assert summary["guard_calls"] == 2 and summary["stride_violations"] == 1
    assert summary["first_violation"]["decode_row_stride"] == 8


def test_only_the_write_that_first_carries_a_violation_is_fsynced(tmp_path, monkeypatch):
    """Periodic counts run on the builder's thread: no fsync stall there, except once."""
    from server_patch import receipts

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(receipts.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    receipt = Receipt(tmp_path, {})
    guard = StrideGuard(sinks=[receipt_sink(lambda: receipt)], flush_interval_s=0)
    build = guard.wrap(packed_like)
    call(build, CAPACITY)
    call(build, CAPACITY)
    assert synced == []
    call(build, 8)  # the first violation
    assert len(synced) == 1
    for width in (8, 16, CAPACITY):
        call(build, width)
    assert len(synced) == 1
    assert _guard_section(receipt.path)["calls"] == 6  # every flush still landed whole
    receipt.update(layout="capacity")  # other receipt writes stay durable
    assert len(synced) == 2


def test_receipt_sink_skips_when_there_is_no_receipt():
    guard = StrideGuard(sinks=[receipt_sink(lambda: None)], flush_interval_s=0)
    call(guard.wrap(packed_like), 8)  # no error, nothing written
    assert guard.snapshot()["violations"] == 1


EXIT_SCRIPT = PACKED_LIKE + """
import json, sys
from server_patch.guard import StrideGuard
from server_patch.guard_sinks import standard_sinks
from server_patch.receipts import Receipt

receipt = Receipt(sys.argv[1], {"layout": "off"})
guard = StrideGuard("1", sinks=standard_sinks(lambda: receipt), flush_interval_s=3600,
                    flush_at_exit=True)
build = guard.wrap(packed_like)
call(build, 32)
call(build, 8)
print("AFTER_FIRST", json.dumps(json.loads(receipt.path.read_text())["guard"]))
for _ in range(5):
    call(build, 16)
call(build, 32)
sys.exit(0)
"""


def test_counts_after_the_last_flush_are_written_at_exit(tmp_path):
    result = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("AFTER_FIRST")]
    at_first = json.loads(line.split(" ", 1)[1])
    assert (at_first["calls"], at_first["violations"]) == (2, 1)  # flushed at once
    (receipt,) = load_receipts(tmp_path)
    assert (receipt["guard"]["calls"], receipt["guard"]["violations"]) == (8, 6)  # at exit
    assert receipt["guard"]["first_violation"]["call"] == 2


FORK_SCRIPT = PACKED_LIKE + """
import multiprocessing, sys
from server_patch.guard import StrideGuard
from server_patch.guard_sinks import receipt_sink
from server_patch.receipts import Receipt

receipt = Receipt(sys.argv[1], {"layout": "off"})
guard = StrideGuard("1", sinks=[receipt_sink(lambda: receipt)], flush_interval_s=3600,
                    flush_at_exit=True)
build = guard.wrap(packed_like)

def child():
    call(build, 32)
    call(build, 32)
    call(build, 8)  # the child's own first violation: its call 3, flushed at once
    call(build, 16)  # these two only at the child's exit
    call(build, 32)

if __name__ == "__main__":
    for width in (8, 16, 16, 32):
        call(build, width)
    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join()
    print("CHILD", process.pid, process.exitcode)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_worker_reports_its_own_counts_when_it_exits(tmp_path):
    """vLLM's fork-started workers leave through os._exit (no atexit): their counts still land."""
    script = tmp_path / "fork_script.py"
    script.write_text(FORK_SCRIPT)
    receipts = tmp_path / "receipts"
    result = subprocess.run([sys.executable, str(script), str(receipts)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("CHILD")]
    _, child_pid, exitcode = line.split()
    assert exitcode == "0"
    child = json.loads(receipt_path(receipts, socket.gethostname(), int(child_pid)).read_text())
    assert child["forked_from"] != int(child_pid)
    assert (child["guard"]["calls"], child["guard"]["violations"]) == (5, 2)
    assert child["guard"]["first_violation"]["call"] == 3
    parent = json.loads(receipt_path(receipts, socket.gethostname(),
                                     child["forked_from"]).read_text())
    assert (parent["guard"]["calls"], parent["guard"]["violations"]) == (4, 3)
    assert parent["guard"]["first_violation"]["call"] == 1


# --------------------------------------------------------------------------- Prometheus


def _value(registry, name: str) -> float | None:
    return registry.get_sample_value(name)


def test_prometheus_counters_follow_the_flushes():
    registry = prometheus_client.CollectorRegistry()
    guard = StrideGuard(sinks=[prometheus_sink(registry)], flush_interval_s=3600)
    build = guard.wrap(packed_like)
    call(build, CAPACITY)
    call(build, CAPACITY)
    assert _value(registry, "dsv4_qual_c128a_builder_calls_total") is None  # not flushed yet
    call(build, 8)  # first violation: flushed at once
    assert _value(registry, "dsv4_qual_c128a_builder_calls_total") == 3
    assert _value(registry, "dsv4_qual_c128a_stride_violations_total") == 1
    call(build, 8)
    call(build, CAPACITY)
    guard.flush()
    guard.flush()  # a second flush adds nothing
    assert _value(registry, "dsv4_qual_c128a_builder_calls_total") == 5
    assert _value(registry, "dsv4_qual_c128a_stride_violations_total") == 2


def test_a_process_that_never_builds_registers_no_counters():
    """vLLM's API server loads the plugin but never builds: no misleading 0 on its /metrics."""
    registry = prometheus_client.CollectorRegistry()
    guard = StrideGuard(sinks=[prometheus_sink(registry)])
    guard.wrap(packed_like)
    guard.flush()
    assert "dsv4_qual" not in prometheus_client.generate_latest(registry).decode()


def test_guards_sharing_a_registry_add_up_and_the_loadgen_reads_the_names():
    registry = prometheus_client.CollectorRegistry()
    guards = [StrideGuard(sinks=[prometheus_sink(registry)]) for _ in range(2)]
    for guard, width in zip(guards, (8, CAPACITY), strict=True):
        call(guard.wrap(packed_like), width)
        guard.flush()
    text = prometheus_client.generate_latest(registry).decode()
    assert tracked(parse_prometheus(text)) == {"stride_violations": 1.0,
                                               "c128a_builder_calls": 2.0}


def test_counters_someone_else_registered_are_counted_into():
    registry = prometheus_client.CollectorRegistry()
    theirs = prometheus_client.Counter("dsv4_qual_c128a_builder_calls", "theirs",
                                       registry=registry)
    guard = StrideGuard(sinks=[prometheus_sink(registry)])
    call(guard.wrap(packed_like), CAPACITY)
    guard.flush()
    assert theirs._value.get() == 1


def test_without_prometheus_client_only_receipts_are_written(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import raises ImportError
    assert prometheus_sink() is None
    receipt = Receipt(tmp_path, {})
    sinks = standard_sinks(lambda: receipt)
    assert len(sinks) == 1
    guard = StrideGuard(sinks=sinks)
    call(guard.wrap(packed_like), 8)
    assert _guard_section(receipt.path)["violations"] == 1


def test_standard_sinks_include_prometheus_when_importable(tmp_path):
    registry = prometheus_client.CollectorRegistry()
    receipt = Receipt(tmp_path, {})
    guard = StrideGuard(sinks=standard_sinks(lambda: receipt, registry))
    call(guard.wrap(packed_like), 8)
    assert _guard_section(receipt.path)["violations"] == 1
    assert _value(registry, "dsv4_qual_c128a_stride_violations_total") == 1
    assert guard_sinks.RECEIPT_SECTION == "guard"


def test_views_are_plain_tensors():
    """Sanity for the fake: it returns views of the buffers, packed at the width."""
    decode, _, prefill = packed_like(torch.zeros(6), 128, 4, None, None, 2, None,
                                     *namespace["BUFFERS"], max_compressed_tokens=8)
    assert decode.stride(0) == prefill.stride(0) == 8
    assert decode.data_ptr() == namespace["BUFFERS"][0].data_ptr()
