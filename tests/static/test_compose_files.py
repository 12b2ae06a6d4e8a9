"""compose.yaml and docker/compose.multinode.yaml are valid Compose files in every
profile (the Compose specification's schema and Compose v2 itself), work without a
.env, and .env.example documents exactly what they use."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from static_support import (
    COMPOSE,
    EIGHT_GPU_PROFILES,
    EIGHT_GPUS,
    ENV_EXAMPLE,
    MULTINODE,
    MULTINODE_REQUIRED,
    PROFILES,
    MissingVariable,
    compose_schema,
    enabled,
    env_example,
    example_env,
    interpolate,
    model,
    raw,
    run_compose,
    variable_uses,
)

CASES = [(path, profile) for path, profiles in PROFILES.items() for profile in profiles]
IDS = [f"{path.name}-{profile or 'default'}" for path, profile in CASES]


def profile_model(path: Path, profile: str | None) -> dict:
    full = model(path)
    return {**full, "services": enabled(full["services"], profile)}


@pytest.mark.parametrize(("path", "profile"), CASES, ids=IDS)
def test_each_profile_matches_the_compose_spec_schema(path: Path, profile: str | None) -> None:
    schema = compose_schema()
    validator = Draft202012Validator(schema)
    problems = sorted(validator.iter_errors(profile_model(path, profile)), key=str)
    assert not problems, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in problems[:5]
    )


def test_the_schema_check_rejects_a_broken_file() -> None:
    # Guards the check itself: a schema that accepted anything would pass every file.
    broken = profile_model(COMPOSE, None)
    broken["services"]["server"]["ipcc"] = "host"
    assert list(Draft202012Validator(compose_schema()).iter_errors(broken))


@pytest.mark.parametrize(("path", "profile"), CASES, ids=IDS)
def test_each_profile_is_self_contained(path: Path, profile: str | None) -> None:
    """`up` with this profile can start every dependency of every service it starts,
    and waits for each to be ready: healthy, or (a one-shot job) finished cleanly."""
    services = profile_model(path, profile)["services"]
    assert services, "the profile starts nothing"
    for name, svc in services.items():
        for dep, how in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on {dep}, which {profile!r} leaves out"
            if "healthcheck" in services[dep]:
                assert how == {"condition": "service_healthy"}, (
                    f"{name} must wait for {dep} to be healthy, not just started")
            else:
                assert how == {"condition": "service_completed_successfully"}, (
                    f"{dep} has no healthcheck: {name} must wait for it to finish")
                assert "restart" not in services[dep], f"{dep} is a one-shot job"


def test_profiles_declared_are_the_documented_ones() -> None:
    for path, documented in PROFILES.items():
        used = {p for svc in raw(path)["services"].values() for p in svc.get("profiles", [])}
        assert used == {p for p in documented if p}, path.name


def test_default_up_starts_one_server_and_the_loadgen() -> None:
    """Plain `docker compose up`: the download, the patched server and the gate."""
    assert set(profile_model(COMPOSE, None)["services"]) == {"download", "server", "loadgen"}


def test_compose_yaml_works_without_a_env_file() -> None:
    """Every variable has a default, and the defaults are .env.example's values."""
    for use in variable_uses(COMPOSE):
        assert use.op == ":-", f"${{{use.name}}} in compose.yaml needs a :-default"
    assert model(COMPOSE, env={}) == model(COMPOSE)


def test_multinode_needs_only_the_head_address() -> None:
    with pytest.raises(MissingVariable, match="DSV4_HEAD_ADDRESS"):
        model(MULTINODE, env={})
    assert model(MULTINODE, env=dict(MULTINODE_REQUIRED)) == model(MULTINODE)


def test_env_example_documents_every_variable_and_nothing_else() -> None:
    example = env_example()
    used = {use.name for path in PROFILES for use in variable_uses(path)}
    assert set(example.values) == used, (
        f"in compose but not .env.example: {sorted(used - set(example.values))}; "
        f"in .env.example but unused: {sorted(set(example.values) - used)}"
    )
    assert not example.undocumented, f"no comment above: {example.undocumented}"


def test_env_example_values_are_the_compose_defaults() -> None:
    """So that a missing .env and a copied .env.example behave the same."""
    values = env_example().values
    for path in PROFILES:
        for use in variable_uses(path):
            if use.op == ":-":
                assert use.arg == values[use.name], (
                    f"{path.name}: ${{{use.name}:-{use.arg}}} but .env.example has "
                    f"{values[use.name]!r}"
                )
            else:
                assert use.op == ":?" and values[use.name] == "", (
                    f"{use.name}: only a required variable may lack a default"
                )


def test_the_hf_token_comes_from_the_environment_only() -> None:
    """Passed through by name (a null value); never a value in a file of the repo."""
    assert not any(line.startswith("HF_TOKEN=") for line in ENV_EXAMPLE.read_text().split("\n"))
    for path in PROFILES:
        for name, svc in raw(path)["services"].items():
            env = svc.get("environment")
            if env is not None and "HF_TOKEN" in env:
                assert env["HF_TOKEN"] is None, f"{path.name}:{name} hard-codes HF_TOKEN"
        assert "hf_" not in path.read_text().replace("hf-cache", ""), path.name


def test_interpolation_follows_the_compose_rules() -> None:
    env = {"SET": "v", "EMPTY": ""}
    assert interpolate("${SET:-d} ${EMPTY:-d} ${UNSET:-d}", env) == "v d d"
    assert interpolate("${EMPTY-d} ${UNSET-d} $$SET $SET", env) == " d $SET v"
    with pytest.raises(MissingVariable):
        interpolate("${EMPTY:?needed}", env)


# ---------------------------------------------------------------- Compose v2 --------


def _extra(path: Path) -> dict[str, str] | None:
    return MULTINODE_REQUIRED if path == MULTINODE else None


@pytest.mark.parametrize(("path", "profile"), CASES, ids=IDS)
def test_compose_v2_accepts_each_profile(path: Path, profile: str | None) -> None:
    done = run_compose([path], profile, ENV_EXAMPLE, _extra(path))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("path", list(PROFILES), ids=lambda p: p.name)
def test_compose_v2_lists_exactly_the_documented_profiles(path: Path) -> None:
    done = run_compose([path], None, ENV_EXAMPLE, _extra(path), args=("config", "--profiles"))
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == {p for p in PROFILES[path] if p}


def test_compose_v2_rejects_a_broken_file(tmp_path: Path) -> None:
    """Guards the check itself: a Compose that accepted anything would pass every file."""
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("    ipc: ", "    ipcc: ", 1)
                      .replace("  ipc: ", "  ipcc: ", 1))
    assert run_compose([broken], None, ENV_EXAMPLE).returncode != 0


def test_compose_v2_accepts_compose_yaml_without_env(tmp_path: Path) -> None:
    empty = tmp_path / "empty.env"
    empty.write_text("")
    done = run_compose([COMPOSE], None, empty)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("path", list(PROFILES), ids=lambda p: p.name)
def test_our_reading_of_the_files_is_compose_v2s(path: Path) -> None:
    """The other tests read the files through static_support; check that reading
    against Compose v2's own for every service's command and environment."""
    profiles = [arg for p in PROFILES[path] if p for arg in ("--profile", p)]
    done = run_compose([path], None, ENV_EXAMPLE, _extra(path), args=(*profiles, "config"))
    assert done.returncode == 0, done.stderr
    theirs = yaml.safe_load(done.stdout)["services"]
    ours = model(path, example_env(path))["services"]
    assert set(theirs) == set(ours)
    for name, svc in ours.items():
        assert theirs[name].get("command") == svc.get("command"), name
        assert theirs[name].get("entrypoint") == svc.get("entrypoint"), name
        env = {k: v for k, v in (svc.get("environment") or {}).items() if v is not None}
        assert {k: str(v) for k, v in env.items()} == {
            k: v for k, v in (theirs[name].get("environment") or {}).items() if v is not None
        }, name


def _eight_gpu_model(profile: str) -> dict:
    env = {"DSV4_REPLICA_DATA_PARALLEL_SIZE": "4"}
    done = run_compose([COMPOSE, EIGHT_GPUS], profile, ENV_EXAMPLE, env)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)["services"]


@pytest.mark.parametrize("profile", EIGHT_GPU_PROFILES)
def test_the_8_gpu_file_gives_each_replica_four_gpus(profile: str) -> None:
    """docker/compose.8-gpus.yaml with DP 4 per replica, as .env.example says: every
    replica has four GPUs of its own, TP x DP uses them, and nothing else changes."""
    services = _eight_gpu_model(profile)
    replicas = {n: s for n, s in services.items() if n.startswith("replica-")}
    assert replicas
    taken: set[str] = set()
    for name, svc in replicas.items():
        (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
        ids = dev["device_ids"]
        assert len(ids) == 4 and all(i.isdigit() for i in ids), (name, ids)
        assert not taken & set(ids), f"{name} shares GPUs"
        taken |= set(ids)
        tp = next(a for a in svc["command"] if a.startswith("--tensor-parallel-size="))
        dp = next(a for a in svc["command"] if a.startswith("--data-parallel-size="))
        assert int(tp.split("=")[1]) * int(dp.split("=")[1]) == 4, name
    plain = yaml.safe_load(run_compose([COMPOSE], profile, ENV_EXAMPLE).stdout)["services"]
    for name, svc in services.items():
        theirs = {k: v for k, v in plain[name].items() if k != "deploy"}
        assert {k: v for k, v in svc.items() if k not in ("deploy", "command")} == {
            k: v for k, v in theirs.items() if k != "command"}, name
