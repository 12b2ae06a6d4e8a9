"""Both Dockerfiles: hadolint-clean, reproducible (pinnable base digests, pinned
packages), no secrets in layers, a build context that holds what they copy, and each
image doing only its job (the loadgen without torch, the server without touching
vLLM's torch)."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from static_support import (
    COMPOSE,
    DOCKERFILE_LOADGEN,
    DOCKERFILE_SERVER,
    DOCKERFILE_SIM,
    REPO,
    env_example,
    hadolint,
    is_loadgen,
    model,
)

DOCKERFILES = [DOCKERFILE_SERVER, DOCKERFILE_LOADGEN, DOCKERFILE_SIM]
CONSTRAINTS = REPO / "docker" / "constraints.txt"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", path.read_text())
    rows = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            rows.append((word.upper(), rest.strip()))
    return rows


def arg_defaults(path: Path) -> dict[str, str]:
    return dict(
        rest.split("=", 1) for word, rest in instructions(path) if word == "ARG" and "=" in rest
    )


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_passes(path: Path) -> None:
    done = subprocess.run(
        [hadolint(), "--no-color", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_is_not_a_no_op(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:latest\nRUN apt-get install curl\n")
    done = subprocess.run(
        [hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "DL3007" in done.stdout


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_every_base_image_can_be_pinned_by_digest(path: Path) -> None:
    """FROM IMAGE:TAG + DIGEST, the digest an overridable build arg ("@sha256:..." or
    empty): nothing is pulled by a floating reference once a digest is set."""
    for word, rest in instructions(path):
        if word == "FROM":
            image = rest.split()[0]
            assert re.fullmatch(r"\$\{(\w+)_IMAGE\}(:\$\{\w+_TAG\})?\$\{\1_DIGEST\}", image), image


def test_digest_settings_are_empty_or_full_digests() -> None:
    for key, value in env_example().values.items():
        if key.endswith("_DIGEST"):
            assert value == "" or re.fullmatch(r"@sha256:[0-9a-f]{64}", value), key
    for path in DOCKERFILES:
        for key, value in arg_defaults(path).items():
            if key.endswith("_DIGEST"):
                assert value == "", f"{path.name}: a digest default belongs in .env.example"


def test_build_arg_defaults_match_env_example() -> None:
    values = env_example().values
    for path in DOCKERFILES:
        args = arg_defaults(path)
        assert args["PYTHON_IMAGE"] == values["DSV4_PYTHON_IMAGE"], path.name
    server = arg_defaults(DOCKERFILE_SERVER)
    assert server["VLLM_IMAGE"] == values["DSV4_VLLM_IMAGE"]
    assert server["VLLM_TAG"] == values["DSV4_VLLM_TAG"]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_no_secrets_in_layers(path: Path) -> None:
    for word, rest in instructions(path):
        if word in ("ARG", "ENV"):
            assert not re.search(r"(TOKEN|SECRET|PASSWORD|API_KEY)", rest, re.I), rest
        if word in ("COPY", "ADD"):
            assert ".env" not in rest.split() and "/root/.cache" not in rest, rest


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_build_context_holds_exactly_what_is_copied(path: Path) -> None:
    """.dockerignore allow-lists the context: each COPY source must be allowed (or the
    build breaks), and secrets or results never reach the daemon."""
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "**", "start from nothing, then allow"
    allowed = [p[1:] for p in patterns if p.startswith("!")]
    for word, rest in instructions(path):
        if word == "COPY" and "--from=" not in rest:
            for source in rest.split()[:-1]:
                assert (REPO / source).exists(), source
                assert any(
                    fnmatch.fnmatch(source, p) or fnmatch.fnmatch(source + "/x", p) for p in allowed
                ), f"{source} is excluded by .dockerignore"
    for secret in (".env", "results/x", ".venv/x", ".git/x"):
        assert not any(fnmatch.fnmatch(secret, p) for p in allowed), secret


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_no_syntax_directive(path: Path) -> None:
    """`# syntax=...` makes BuildKit fetch a frontend image from a registry: a build on a
    node without registry access (or behind a proxy) fails before the first step."""
    assert not re.search(r"^#\s*syntax\s*=", path.read_text(), re.MULTILINE | re.IGNORECASE)


def test_server_installs_the_plugin_without_touching_torch_or_vllm() -> None:
    runs = [rest for word, rest in instructions(DOCKERFILE_SERVER) if word == "RUN"]
    install = next(r for r in runs if "install --system" in r)
    assert "--no-deps" in install
    assert "vllm.general_plugins" in install, "the build checks the entry point"
    # ...and imports what it names: vLLM only logs a plugin that fails to import.
    assert re.search(r"\bimport server_patch\.plugin\b", install), install
    env = " ".join(rest for word, rest in instructions(DOCKERFILE_SERVER) if word == "ENV")
    for setting in (
        "DSV4_QUAL_C128A_LAYOUT=capacity",
        "DSV4_QUAL_STRICT=1",
        "DSV4_QUAL_RECEIPT_DIR=/receipts",
    ):
        assert setting in env, setting


def test_loadgen_image_is_the_loadgen_alone() -> None:
    rows = instructions(DOCKERFILE_LOADGEN)
    runs = " ".join(rest for word, rest in rows if word == "RUN")
    assert not re.search(r"\.whl\S*\[|dsv4-qual\[", runs), "core dependencies only, no extras"
    assert "find_spec('torch') is not None" in runs, "the build proves torch is absent"
    assert "--constraint" in runs
    users = [rest for word, rest in rows if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    uid, gid = users[-1].split(":")
    # The user's own group has the gid it runs with, so files it writes carry a group
    # that exists in the image (useradd --user-group would pick a system gid instead).
    assert re.search(rf"groupadd\b[^&]*--gid {gid}\b", runs), runs
    assert re.search(rf"useradd\b[^&]*--uid {uid}\b[^&]*--gid {gid}\b", runs), runs
    assert re.search(rf"chown {uid}:{gid} /results", runs)
    for name, svc in model(COMPOSE)["services"].items():
        if is_loadgen(svc):
            assert svc["user"] == f"{uid}:{gid}", name
    entry = [rest for word, rest in rows if word == "ENTRYPOINT"]
    assert entry == ['["dsv4-qual"]']


def test_constraints_pin_every_dependency() -> None:
    """docker/refresh-constraints.sh must be re-run when pyproject.toml's deps change."""
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = project["project"]["dependencies"] + project["build-system"]["requires"]
    for spec in map(Requirement, wanted):
        key = re.sub(r"[-_.]+", "-", spec.name).lower()
        assert key in pins, f"{spec.name} is not pinned in docker/constraints.txt"
        assert spec.specifier.contains(pins[key]), f"{spec.name}=={pins[key]} violates {spec}"


def test_loadgen_image_puts_each_run_in_its_own_directory_on_the_volume() -> None:
    text = (REPO / "docker" / "Dockerfile.loadgen").read_text()
    assert re.search(r"^ENV DSV4_QUAL_RESULTS_ROOT=/results$", text, re.MULTILINE)


def test_the_sim_image_is_the_sim_on_torchs_cpu_build() -> None:
    """The sim image serves on a machine with no GPU: torch's CPU build from its own
    index (PyPI's Linux torch is the CUDA build, several GB), alone and at a pinned
    version, then the `sim` extra, pinned; no triton; the build proves the torch is a CPU
    build and that the sim imports."""
    rows = instructions(DOCKERFILE_SIM)
    args = arg_defaults(DOCKERFILE_SIM)
    assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    assert re.fullmatch(r"\d+\.\d+\.\d+", args["TORCH_VERSION"])
    assert args["TORCH_INDEX_URL"] == env_example().values["DSV4_TORCH_INDEX_URL"]
    runs = " ".join(rest for word, rest in rows if word == "RUN")
    torch_install, rest = runs.split("&&", 1)
    assert 'PIP_INDEX_URL="${TORCH_INDEX_URL}"' in torch_install
    assert "--no-deps" in torch_install and '"torch==${TORCH_VERSION}"' in torch_install
    assert "--constraint" in rest and '"$(ls /tmp/dist/*.whl)[sim]"' in rest, rest
    assert rest.index('"torch==${TORCH_VERSION}"') < rest.index("[sim]"), "torch stays the CPU one"
    assert "torch.version.cuda is not None" in rest and "import server_patch.sim.server" in rest
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    names = {Requirement(r).name for r in extras["sim"]}
    assert "triton" not in names
    assert names <= {Requirement(r).name for r in extras["server"]}, "the sim is part of the server"
    users = [rest for word, rest in rows if word == "USER"]
    assert users[-1] == "10001:10001"
    assert [rest for word, rest in rows if word == "ENTRYPOINT"] == ['["dsv4-qual", "sim"]']


def test_constraints_pin_the_sims_packages() -> None:
    """What the sim image adds to the loadgen's packages is pinned too (torch is pinned
    by the Dockerfile's TORCH_VERSION)."""
    pins = {re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()
            for line in CONSTRAINTS.read_text().splitlines() if line and line[0] != "#"}
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for spec in map(Requirement, extras["sim"]):
        if spec.name != "torch":
            assert re.sub(r"[-_.]+", "-", spec.name).lower() in pins, spec.name
    # torch's own dependencies (those of its CPU build) are pinned as well.
    for name in ("sympy", "networkx", "filelock"):
        assert name in pins, name
