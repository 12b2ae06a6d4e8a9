"""The two images as `docker compose build` makes them from the project's Dockerfiles,
on the stand-in bases (tests/docker/standin_images.py).

Contract under test (docker/Dockerfile.server, docker/Dockerfile.loadgen): the server
image is the vLLM image plus our wheel, with vLLM's entry point untouched and the
plugin both registered and importable; the loadgen image runs `dsv4-qual` as uid and
gid 10001 (one user, one group), without torch.
"""

from __future__ import annotations

import json

import pytest
from compose_project import ComposeProject
from standin_images import StandIns

pytestmark = [pytest.mark.docker, pytest.mark.timeout(2400)]

ENTRY_POINT_PROBE = (
    "from importlib.metadata import entry_points; import json, server_patch.plugin as p; "
    "print(json.dumps({e.name: e.value for e in entry_points(group='vllm.general_plugins')}"
    " | {'register': callable(p.register)}))"
)


def _image(compose: ComposeProject, service: str) -> str:
    config = json.loads(compose.run("config", "--format", "json", timeout=120).stdout)
    return str(config["services"][service]["image"])


def _inspect(compose: ComposeProject, ref: str) -> dict[str, object]:
    return json.loads(compose.daemon.docker("image", "inspect", ref).stdout)[0]


def _run(compose: ComposeProject, ref: str, entrypoint: str, *args: str) -> str:
    return compose.daemon.docker("run", "--rm", "--network", "none", "--entrypoint",
                                 entrypoint, ref, *args, timeout=300).stdout


def test_the_server_image_is_the_vllm_image_plus_the_plugin(
        compose: ComposeProject, standins: StandIns) -> None:
    server = _image(compose, "server")
    assert server.endswith(":" + standins.vllm_tag), "tagged after the vLLM it is built on"
    base_layers = _inspect(compose, standins.vllm_ref)["RootFS"]["Layers"]  # type: ignore[index]
    layers = _inspect(compose, server)["RootFS"]["Layers"]  # type: ignore[index]
    assert layers[:len(base_layers)] == base_layers, "built FROM the vLLM image"
    config = _inspect(compose, server)["Config"]
    assert isinstance(config, dict)
    assert config["Entrypoint"] == ["vllm", "serve"], "vLLM's entry point, inherited"
    for setting in ("DSV4_QUAL_C128A_LAYOUT=capacity", "DSV4_QUAL_STRICT=1",
                    "DSV4_QUAL_RECEIPT_DIR=/receipts"):
        assert setting in config["Env"], setting
    found = json.loads(_run(compose, server, "python3", "-c", ENTRY_POINT_PROBE).splitlines()[-1])
    assert found["dsv4_qual_c128a"] == "server_patch.plugin:register"
    assert found["register"] is True


def test_the_loadgen_image_runs_as_one_non_root_user_without_torch(
        compose: ComposeProject) -> None:
    loadgen = _image(compose, "loadgen")
    ids = _run(compose, loadgen, "id").strip()
    assert ids.startswith("uid=10001(dsv4) gid=10001(dsv4)"), ids
    assert _run(compose, loadgen, "python", "-c",
                "import importlib.util as u; print(u.find_spec('torch'))").strip() == "None"
    assert "dsv4-qual" in _run(compose, loadgen, "dsv4-qual", "--version")
