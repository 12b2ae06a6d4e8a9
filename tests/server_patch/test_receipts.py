"""Receipts: one file per process, always whole, updatable, fork-aware."""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest

from server_patch import receipts
from server_patch.receipts import Receipt, load_receipts, receipt_path, write_json_atomic


def test_receipt_is_named_after_host_and_pid_and_has_the_base_keys(tmp_path):
    receipt = Receipt(tmp_path, {"layout": "capacity"})
    path = receipt.write()
    assert path == tmp_path / f"{socket.gethostname()}-{os.getpid()}.json"
    data = json.loads(path.read_text())
    assert data["schema"] == 1 and data["tool"] == "dsv4-qual"
    assert data["pid"] == os.getpid() and data["hostname"] == socket.gethostname()
    assert data["layout"] == "capacity"
    assert data["time"].endswith("Z") and "T" in data["time"]
    assert isinstance(data["tool_version"], str) and data["tool_version"]
    assert isinstance(data["process"], str) and data["process"]


def test_updates_rewrite_the_whole_file_and_leave_no_temp_files(tmp_path):
    receipt = Receipt(tmp_path, {"first_call": None})
    receipt.write()
    receipt.update(first_call={"width": 256})
    receipt.merge_section("guard", {"calls": 10})
    receipt.merge_section("guard", {"violations": 0})
    data = json.loads(receipt.path.read_text())
    assert data["first_call"] == {"width": 256}
    assert data["guard"] == {"calls": 10, "violations": 0}
    assert [p.name for p in tmp_path.iterdir()] == [receipt.path.name]
    assert oct(receipt.path.stat().st_mode & 0o777) == oct(0o644)


def test_atomic_write_keeps_the_old_file_when_serialization_fails(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, {"ok": True})

    class Boom:
        def __str__(self):
            raise RuntimeError("cannot serialize")

    with pytest.raises(RuntimeError):
        write_json_atomic(path, {"bad": Boom()})
    assert json.loads(path.read_text()) == {"ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_concurrent_updates_never_expose_a_partial_file(tmp_path):
    receipt = Receipt(tmp_path, {"blob": "x" * 100_000})
    receipt.write()
    stop = threading.Event()
    errors: list[Exception] = []

    def reader():
        while not stop.is_set():
            try:
                json.loads(receipt.path.read_text())
            except Exception as err:  # a torn read would land here
                errors.append(err)

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(100):
        receipt.merge_section("guard", {"calls": i})
    stop.set()
    thread.join()
    assert errors == []
    assert json.loads(receipt.path.read_text())["guard"]["calls"] == 99


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_writes_its_own_receipt(tmp_path):
    receipt = Receipt(tmp_path, {"first_call": None})
    parent_path = receipt.write()
    pid = os.fork()
    if pid == 0:  # child: update and leave without running pytest's teardown
        try:
            receipt.update(first_call={"width": 8})
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    child_path = receipt_path(tmp_path, socket.gethostname(), pid)
    child = json.loads(child_path.read_text())
    assert child["pid"] == pid and child["forked_from"] == os.getpid()
    assert child["first_call"] == {"width": 8}
    assert json.loads(parent_path.read_text())["first_call"] is None


def test_durable_writes_fsync_and_others_do_not(tmp_path, monkeypatch):
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(receipts.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    receipt = Receipt(tmp_path, {})
    receipt.write()
    receipt.merge_section("guard", {"calls": 1})
    assert len(synced) == 2
    receipt.merge_section("guard", {"calls": 2}, durable=False)
    write_json_atomic(tmp_path / "x.json", {"a": 1}, durable=False)
    assert len(synced) == 2
    assert json.loads(receipt.path.read_text())["guard"] == {"calls": 2}
    assert json.loads((tmp_path / "x.json").read_text()) == {"a": 1}


def test_load_receipts_skips_temp_and_broken_files(tmp_path):
    Receipt(tmp_path, {"layout": "prefix"}).write()
    (tmp_path / ".host-1.json.abc.tmp").write_text("{")
    (tmp_path / "broken.json").write_text("{not json")
    found = load_receipts(tmp_path)
    assert [r["layout"] for r in found] == ["prefix"]


def test_tool_version_falls_back_when_not_installed(monkeypatch):
    def missing(name):
        raise receipts.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(receipts.metadata, "version", missing)
    assert receipts.tool_version() == "unknown"
