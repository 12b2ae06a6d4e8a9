"""Every load-generator service: waits for healthy servers, targets servers of its own
profile, runs scenarios that exist and validate, keeps results and receipts on volumes,
reads the receipts of the servers it qualifies, and has time to write its reports when
stopped; and its command line is one the `dsv4-qual` CLI accepts."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import click
import pytest
from static_support import (
    ADD_ON_PROFILES,
    COMPOSE,
    MULTINODE,
    PROFILES,
    enabled,
    env_example,
    flags,
    is_loadgen,
    model,
    raw,
    seconds,
)

from loadgen.commands.qualify import side_scenario, with_sides
from loadgen.scenario import Role, load_scenario

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


def _mounted_volume(svc: dict, target: str) -> str:
    (mount,) = [v for v in svc["volumes"] if v.split(":")[1] == target]
    assert mount.endswith(":ro"), "the load generator only reads receipts"
    return mount.split(":")[0]


def test_qualify_proves_the_candidate_is_patched() -> None:
    """The qualify profile reads each side's receipts from the volume that side's server
    writes, and its scenario requires the candidate's."""
    svc = LOADGENS["qualify"]
    opts = options(svc["command"])
    for side, url_option in (("candidate", "--candidate"), ("control", "--control")):
        (receipts,) = opts[f"--{side}-receipts-dir"]
        (url,) = opts[url_option]
        server = SERVICES[urlsplit(url).hostname]
        assert f"{_mounted_volume(svc, receipts)}:/receipts" in server["volumes"], side
    scenario = load_scenario(svc["command"][1])
    cfg = with_sides(scenario, control_urls=opts["--control"],
                     candidate_urls=opts["--candidate"],
                     control_receipts=opts["--control-receipts-dir"][0],
                     candidate_receipts=opts["--candidate-receipts-dir"][0])
    assert side_scenario(scenario, cfg, Role.CANDIDATE).gate.require_receipts


@pytest.mark.parametrize("name", IDS)
def test_a_stopped_load_generator_has_time_to_write_its_reports(name: str) -> None:
    """Compose's 10 s default would SIGKILL a run (exit 137) while it writes reports."""
    assert seconds(LOADGENS[name]["stop_grace_period"]) >= 60


def test_results_live_on_an_external_volume() -> None:
    """`docker compose down -v` must not delete the results and the soak's history."""
    for path in (COMPOSE, MULTINODE):
        assert raw(path)["volumes"]["results"] == {"name": "dsv4-qual-results",
                                                   "external": True}
    assert env_example().values["DSV4_RESULTS"] == "results"


def test_the_multinode_gate_reads_the_nodes_receipts() -> None:
    """The documented multi-node gate: the release gate requires receipts, so it must
    be given the volume the nodes write them to, and a fresh directory per run."""
    services = model(MULTINODE)["services"]
    gate = services["gate"]
    opts = options(gate["command"])
    assert gate["command"][:2] == ["run", env_example().values["DSV4_SCENARIO"]]
    assert "--out" not in opts
    (receipts,) = opts["--receipts-dir"]
    volume = _mounted_volume(gate, receipts)
    for role in ("head", "worker", "hybrid"):
        assert f"{volume}:/receipts" in services[role]["volumes"], role
    assert any(v.endswith(":/results") for v in gate["volumes"])
    assert seconds(gate["stop_grace_period"]) >= 60


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
    assert set(documented) == set(PROFILES[COMPOSE]) - set(ADD_ON_PROFILES)
    for profile, name in documented.items():
        assert name in enabled(SERVICES, profile) and name in LOADGENS
