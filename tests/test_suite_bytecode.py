"""The suite keeps compiled modules in the project's cache (`tests/conftest.py`), except in
a session that starts vLLM's interpreter, whose venv has its own compiled packages."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import pytest

from tests.conftest import _selects

FAST = ("not gpu and not vllm and not slow and not docker and not slurm and not long "
        "and not services")


@pytest.mark.parametrize(("markexpr", "selects_vllm"), [
    (FAST, False), ("vllm", True), ("slow", False), ("long or services", False),
    ("vllm or slow", True), ("not docker", True), ("", True)])
def test_only_a_session_that_may_start_vllm_is_left_as_it_is(markexpr: str,
                                                             selects_vllm: bool) -> None:
    config = SimpleNamespace(getoption=lambda name, default=None: markexpr)
    assert _selects(config, "vllm") is selects_vllm  # type: ignore[arg-type]


def test_this_session_and_its_children_keep_bytecode_in_the_cache(
        pytestconfig: pytest.Config) -> None:
    if _selects(pytestconfig, "vllm"):
        pytest.skip("a session that may start vLLM keeps the machine's bytecode setting")
    assert sys.pycache_prefix and not sys.dont_write_bytecode
    assert os.environ["PYTHONPYCACHEPREFIX"] == sys.pycache_prefix
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    assert not sys.pycache_prefix.startswith(str(pytestconfig.rootpath))
