"""Every load-generator service: waits for healthy servers, targets servers of its own
profile, runs scenarios that exist and validate, and keeps results and receipts on
volumes; and its command line is one the `dsv4-qual` CLI accepts."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import click
import pytest
from static_support import COMPOSE, PROFILES, enabled, env_example, flags, is_loadgen, model

from loadgen.scenario import load_scenario

SERVICES = model(COMPOSE)["services"]
LOADGENS = {name: svc for name, svc in SERVICES.items() if is_loadgen(svc)}
IDS = list(LOADGENS)
SCENARIO_VARIABLES = [k for k in env_example().values if k.endswith("SCENARIO")]


def options(command: list[str]) -> dict[str, list[str]]:
    """--option=value items after `SUBCOMMAND SCENARIO`, repeated options kept."""
    found: dict[str, list[str]] = {}
    for item in command[2:]:
        name, _, value = item.partition("=")
        assert name.startswith("--"), f"{item!r}: write options as --option=value"
        found.setdefault(name, []).append(value)
    return found


def target_urls(command: list[str]) -> list[str]:
    opts = options(command)
    return opts.get("--base-url", []) + opts.get("--control", []) + opts.get("--candidate", [])


def test_the_expected_load_generators_exist() -> None:
    assert set(LOADGENS) == {"loadgen", "loadgen-control", "soak", "loadgen-dp", "qualify"}


@pytest.mark.parametrize("name", IDS)
def test_targets_are_healthy_servers_of_its_profile(name: str) -> None:
    svc = LOADGENS[name]
    urls = target_urls(svc["command"])
    assert urls, "no server to load"
    profile = (svc.get("profiles") or [None])[0]
    visible = enabled(SERVICES, profile)
    for url in urls:
        parts = urlsplit(url)
        host = parts.hostname
        assert host in visible, f"{url}: {host} is not started with profile {profile!r}"
        assert svc["depends_on"][host] == {"condition": "service_healthy"}
        port = flags(SERVICES[host]["command"])["--port"]
        assert parts.port == int(port) and parts.path in ("", "/"), url


@pytest.mark.parametrize("name", IDS)
def test_scenario_exists_and_validates(name: str) -> None:
    scenario = LOADGENS[name]["command"][1]
    loaded = load_scenario(scenario)  # raises BadInputError (exit code 3) otherwise
    assert loaded.description.strip(), f"{scenario} says nothing about what it proves"


@pytest.mark.parametrize("variable", SCENARIO_VARIABLES)
def test_every_scenario_default_validates(variable: str) -> None:
    load_scenario(env_example().values[variable])


def test_the_control_run_is_a_control() -> None:
    """With the bug left in, the gate's role must be `control` (it must reproduce)."""
    control = load_scenario(LOADGENS["loadgen-control"]["command"][1])
    assert control.gate.role == "control"
    for name in ("loadgen", "loadgen-dp", "soak"):
        assert load_scenario(LOADGENS[name]["command"][1]).gate.role == "candidate", name


@pytest.mark.parametrize("name", IDS)
def test_results_and_receipts_are_on_volumes(name: str) -> None:
    svc = LOADGENS[name]
    mounts = {v.split(":")[1]: v for v in svc["volumes"]}
    assert "/results" in mounts
    # A fixed --out would hold last night's run, and results are never overwritten:
    # every run must get its own directory under the volume (DSV4_QUAL_RESULTS_ROOT).
    assert "--out" not in options(svc["command"]), svc["command"]
    receipts = options(svc["command"]).get("--receipts-dir")
    if receipts:
        (path,) = receipts
        volume = mounts[path].split(":")[0]
        assert mounts[path].endswith(":ro"), "the load generator only reads receipts"
        for url in target_urls(svc["command"]):
            server = SERVICES[urlsplit(url).hostname]
            assert f"{volume}:/receipts" in server["volumes"], (
                f"{name} reads {volume}, which {urlsplit(url).hostname} does not write"
            )


def test_candidate_runs_read_the_candidates_receipts() -> None:
    """A gate with require_receipts must get the receipts of the server it tests."""
    for name in ("loadgen", "loadgen-dp", "soak"):
        assert "--receipts-dir" in options(LOADGENS[name]["command"]), name


@pytest.mark.parametrize("name", IDS)
def test_runs_as_the_images_non_root_user(name: str) -> None:
    user = LOADGENS[name]["user"]
    assert re.fullmatch(r"\d+:\d+", user) and not user.startswith("0:"), user


def _cli() -> click.Group:
    from loadgen import cli

    cli._load_command_plugins()
    return cli.cli


@pytest.mark.parametrize("name", IDS)
def test_command_line_is_one_the_cli_accepts(name: str) -> None:
    command = LOADGENS[name]["command"]
    sub = _cli().commands.get(command[0])
    if sub is None:
        pytest.skip(f"the CLI has no `{command[0]}` command yet")
    known = {opt for param in sub.params for opt in getattr(param, "opts", [])}
    unknown = set(options(command)) - known
    assert not unknown, f"`dsv4-qual {command[0]}` has no {sorted(unknown)}"
    repeated = [o for o, v in options(command).items() if len(v) > 1]
    for opt in repeated:
        param = next(p for p in sub.params if opt in getattr(p, "opts", []))
        assert getattr(param, "multiple", False), f"{opt} cannot be repeated"


def test_every_profile_has_a_run_whose_exit_code_is_the_gate() -> None:
    """`up --exit-code-from X X` is documented per profile: X must be a loadgen."""
    documented = {
        None: "loadgen",
        "control": "loadgen-control",
        "soak": "soak",
        "dp": "loadgen-dp",
        "qualify": "qualify",
    }
    assert set(documented) == set(PROFILES[COMPOSE])
    for profile, name in documented.items():
        assert name in enabled(SERVICES, profile) and name in LOADGENS
