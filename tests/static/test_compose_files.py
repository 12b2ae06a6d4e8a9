"""compose.yaml and docker/compose.multinode.yaml are valid Compose files in every
profile, work without a .env, and .env.example documents exactly what they use."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from static_support import (
    COMPOSE,
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
    run_docker_compose,
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
    """`up` with this profile can start every dependency of every service it starts."""
    services = profile_model(path, profile)["services"]
    assert services, "the profile starts nothing"
    for name, svc in services.items():
        for dep, how in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on {dep}, which {profile!r} leaves out"
            assert how == {"condition": "service_healthy"}, (
                f"{name} must wait for {dep} to be healthy, not just started"
            )
            assert "healthcheck" in services[dep], f"{dep} has no healthcheck to wait for"


def test_profiles_declared_are_the_documented_ones() -> None:
    for path, documented in PROFILES.items():
        used = {p for svc in raw(path)["services"].values() for p in svc.get("profiles", [])}
        assert used == {p for p in documented if p}, path.name


def test_default_up_starts_one_server_and_the_loadgen() -> None:
    """Plain `docker compose up`: the patched server and the qualification run."""
    assert set(profile_model(COMPOSE, None)["services"]) == {"server", "loadgen"}


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


# ---------------------------------------------------------------- docker-compose ----


@pytest.mark.parametrize(("path", "profile"), CASES, ids=IDS)
def test_docker_compose_accepts_each_profile(path: Path, profile: str | None) -> None:
    extra = MULTINODE_REQUIRED if path == MULTINODE else None
    done = run_docker_compose(path, profile, ENV_EXAMPLE, extra)
    assert done.returncode == 0, done.stderr


def test_docker_compose_accepts_compose_yaml_without_env(tmp_path: Path) -> None:
    empty = tmp_path / "empty.env"
    empty.write_text("")
    done = run_docker_compose(COMPOSE, None, empty)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("path", list(PROFILES), ids=lambda p: p.name)
def test_our_reading_of_the_files_is_docker_composes(path: Path) -> None:
    """The other tests read the files through static_support; check that reading
    against docker-compose's own for every service's command and environment."""
    extra = MULTINODE_REQUIRED if path == MULTINODE else None
    done = run_docker_compose(path, None, ENV_EXAMPLE, extra)
    assert done.returncode == 0, done.stderr
    theirs = yaml.safe_load(done.stdout)["services"]
    ours = model(path, example_env(path))["services"]
    assert set(theirs) == set(ours)
    for name, svc in ours.items():
        assert theirs[name].get("command") == svc.get("command"), name
        if svc.get("environment"):
            assert {
                k: (None if v is None else str(v)) for k, v in svc["environment"].items()
            } == theirs[name]["environment"], name
