"""The docker tier's own rule: never a silent skip where Docker is required.

Not marked `docker`: it runs in every default test run, without Docker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tier_requirements import REQUIRE_ENV, missing_prerequisites, unavailable


def test_where_docker_is_required_a_missing_prerequisite_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="cannot run: no dockerd"):
        unavailable("no dockerd")


@pytest.mark.parametrize("value", [None, "0", ""])
def test_elsewhere_it_skips_and_says_why(monkeypatch: pytest.MonkeyPatch,
                                         value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(REQUIRE_ENV, raising=False)
    else:
        monkeypatch.setenv(REQUIRE_ENV, value)
    with pytest.raises(pytest.skip.Exception, match="no dockerd"):
        unavailable("no dockerd")


def test_missing_tools_and_compose_are_named(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    problems = " ".join(missing_prerequisites(tmp_path))
    for tool in ("dockerd", "docker", "debootstrap", "Compose v2"):
        assert tool in problems
