"""A folder nobody may write, root included, for the read-only share a user reads from."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _writable(folder: Path) -> bool:
    probe = folder / ".write-probe"
    try:
        probe.write_bytes(b"")
    except OSError:
        return False
    probe.unlink()
    return True


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` and all below it unwritable while the block runs.

    Modes stop every user but root; root (CI runs tests as root) is stopped by the
    immutable attribute. A folder that stays writable fails the test: a check that
    could not see the read-only case must not pass.
    """
    tree = [folder, *folder.rglob("*")]
    modes = {p: p.stat().st_mode for p in tree}
    immutable = os.geteuid() == 0 and shutil.which("chattr") is not None
    for path in tree:
        path.chmod(modes[path] & ~0o222)
    if immutable:
        subprocess.run(["chattr", "-R", "+i", str(folder)], check=True, capture_output=True)
    try:
        if _writable(folder):
            pytest.fail(f"{folder}: could not be made read-only on this machine")
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-R", "-i", str(folder)], check=True,
                           capture_output=True)
        for path in tree:
            path.chmod(modes[path])
