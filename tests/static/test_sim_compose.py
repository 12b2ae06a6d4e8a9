"""compose.sim.yaml, the path without a GPU: the sim's service serves what `dsv4-qual sim`
accepts from the sim image, and the load generator is compose.yaml's, waiting for the
sim's health, running a scenario that exists against it, reading its receipts, keeping
its results on compose.yaml's external results volume. No GPU, no model, no download:
nothing of the GPU file's servers or caches is in it. (That it runs, and that the gate
passes the fix and fails the bug, is the docker tier's test_compose_sim.py.)"""

from __future__ import annotations

from urllib.parse import urlsplit

import click
from static_support import COMPOSE, SIM_COMPOSE, env_example, model, raw, seconds

from loadgen.cli import _load_command_plugins, cli
from loadgen.scenario import Role, load_scenario

SERVICES = model(SIM_COMPOSE)["services"]


def _options(args: list[str]) -> dict[str, str]:
    found = {}
    for item in args:
        name, _, value = item.partition("=")
        assert name.startswith("--") and name not in found, item
        found[name] = value
    return found


def _command(name: str) -> click.Command:
    _load_command_plugins()
    command = cli.commands[name]
    assert isinstance(command, click.Command)
    return command


def test_only_the_sim_and_its_load_generator() -> None:
    assert set(SERVICES) == {"sim", "loadgen"}
    for svc in SERVICES.values():
        assert "deploy" not in svc and "gpus" not in svc, "no GPU is asked for"
        assert not svc.get("profiles"), "plain `up` runs it"
    assert set(raw(SIM_COMPOSE)["volumes"]) == {"results", "receipts-sim"}


def test_the_sim_serves_options_the_sim_command_accepts() -> None:
    sim = SERVICES["sim"]
    assert sim["build"]["dockerfile"] == "docker/Dockerfile.sim"
    assert sim["image"] == f"{env_example().values['DSV4_SIM_IMAGE']}:latest"
    opts = _options(sim["command"])
    # click parses them as the container's entrypoint (`dsv4-qual sim`) will.
    _command("sim").make_context("sim", list(sim["command"]))
    assert opts["--host"] == "0.0.0.0" and opts["--receipts-dir"] == "/receipts"
    assert opts["--layout"] == env_example().values["DSV4_SIM_LAYOUT"] == "capacity"
    assert "receipts-sim:/receipts" in sim["volumes"]
    assert sim["attach"] is False
    assert sim["restart"].startswith("on-failure:")


def test_the_load_generator_is_compose_yamls_gating_the_healthy_sim() -> None:
    gate = SERVICES["loadgen"]
    theirs = model(COMPOSE)["services"]["loadgen"]
    for key in ("build", "image", "user"):
        assert gate[key] == theirs[key], key
    assert seconds(gate["stop_grace_period"]) >= 60
    assert gate["depends_on"] == {"sim": {"condition": "service_healthy"}}
    command = gate["command"]
    assert command[0] == "run"
    scenario = load_scenario(command[1])
    assert command[1] == env_example().values["DSV4_SIM_SCENARIO"]
    assert scenario.gate.role is Role.CANDIDATE and scenario.gate.require_receipts
    _command("run").make_context("run", list(command[1:]))
    opts = _options(command[2:])
    url = urlsplit(opts["--base-url"])
    sim_port = _options(SERVICES["sim"]["command"])["--port"]
    assert (url.hostname, url.port) == ("sim", int(sim_port))
    assert opts["--receipts-dir"] == "/receipts"
    assert "receipts-sim:/receipts:ro" in gate["volumes"]
    assert "--out" not in opts, "a fixed --out would fail the second run"


def test_results_go_to_compose_yamls_external_volume() -> None:
    assert raw(SIM_COMPOSE)["volumes"]["results"] == raw(COMPOSE)["volumes"]["results"] \
        == {"name": "dsv4-qual-results", "external": True}
    assert any(v.endswith(":/results") for v in SERVICES["loadgen"]["volumes"])
