"""The console entry point's use of the cyclic garbage collector: full passes wait ten
times longer than Python's default (a command builds what it holds as it starts and keeps
it), and what the command held is frozen as it exits (not walked once more at shutdown).
In-process runs (click's runner, the tests') leave the collector as it is."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from loadgen import cli

REPO = Path(__file__).resolve().parents[3]

SEEN_AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print(gc.get_threshold(), gc.get_freeze_count() > 0, flush=True))
sys.argv = ["dsv4-qual", "--version"]
from loadgen.cli import main
main()
"""


def test_the_entry_point_waits_longer_for_full_collections_and_freezes_at_exit() -> None:
    done = subprocess.run([sys.executable, "-c", SEEN_AT_EXIT], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    young, middle, _ = gc.get_threshold()
    assert done.stdout.splitlines()[-1] == \
        f"{(young, middle, cli.FULL_COLLECTION_EVERY)} True"


def test_importing_the_cli_leaves_the_collector_alone() -> None:
    code = "import gc; before = gc.get_threshold(); import loadgen.cli; " \
           "print(gc.get_threshold() == before, gc.get_freeze_count())"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip() == "True 0"
