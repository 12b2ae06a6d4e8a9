"""Whether the docker tier can run here, and what happens when it cannot.

A developer without root or Docker tools gets a skip that says how to get them; CI
sets DSV4_QUAL_REQUIRE_DOCKER=1, where the same finding is a failure: a tier that
silently skipped would pass every change to the Dockerfiles and compose files. Stdlib
(and pytest) only.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from docker_daemon import missing_tools

REQUIRE_ENV = "DSV4_QUAL_REQUIRE_DOCKER"


def cache_root() -> Path:
    """The project's cache (the `vllm` tier's too): DSV4_QUAL_CACHE or ~/.cache/dsv4-qual."""
    return Path(os.environ.get("DSV4_QUAL_CACHE") or Path.home() / ".cache" / "dsv4-qual")


def plugins_dir() -> Path:
    """Compose v2 and buildx, where .ci/compose-v2.sh puts them."""
    return Path(os.environ.get("DSV4_QUAL_DOCKER_PLUGINS") or cache_root() / "docker-cli-plugins")


def missing_prerequisites(plugins: Path) -> list[str]:
    """What stops the tier from running on this machine (empty: nothing)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the tier starts its own dockerd, which needs root")
    missing = missing_tools()
    if missing:
        problems.append(f"{', '.join(missing)} not installed (sudo bash .ci/docker-tools.sh)")
    if not (plugins / "docker-compose").is_file():
        problems.append(f"no Compose v2 in {plugins} (bash .ci/compose-v2.sh)")
    return problems


def unavailable(reason: str) -> None:
    """Skip the tier, or fail it where Docker is required (CI must never skip it)."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"the docker tier cannot run: {reason}", pytrace=False)
    pytest.skip(reason)
