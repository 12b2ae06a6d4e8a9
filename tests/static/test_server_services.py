"""Every vLLM server the compose files start: a command vLLM's image entrypoint accepts,
the DeepSeek-V4-Flash DSpark recipe pinned to one checkpoint revision, the plugin's
settings, what the node needs, and what keeps an operator's day short (the download
done first, JIT caches on volumes, a restart policy)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from static_support import (
    COMMIT_ID,
    COMPOSE,
    DOCKERFILE_SERVER,
    FLAG_LISTS,
    MULTINODE,
    all_servers,
    env_example,
    flags,
    known_flags,
    model,
    raw,
    seconds,
)

from loadgen.scenario import load_scenario

SERVERS = list(all_servers())
IDS = [f"{label}:{name}" for label, name, _ in SERVERS]

# Flags that legitimately differ between servers: how each one spreads over GPUs
# and nodes, and where it listens.
TOPOLOGY = {
    "--tensor-parallel-size",
    "--data-parallel-size",
    "--data-parallel-size-local",
    "--data-parallel-address",
    "--data-parallel-rpc-port",
    "--data-parallel-start-rank",
    "--data-parallel-hybrid-lb",
    "--headless",
    "--host",
    "--port",
}
CONTROLS = {"server-control", "replica-control"}
# Where the JIT caches live in a server container: each must be on a volume.
JIT_CACHES = ("/root/.cache/vllm", "/root/.cache/flashinfer", "/root/.triton")
SCENARIO_VARIABLES = [k for k in env_example().values if k.endswith("SCENARIO")]


def test_there_is_a_server_in_each_role() -> None:
    names = {name for _, name, _ in SERVERS}
    assert {
        "server",
        "server-control",
        "replica-0",
        "replica-1",
        "replica-control",
        "head",
        "worker",
        "hybrid",
    } <= names


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_command_fits_the_vllm_image_entrypoint(label: str, name: str, svc: dict) -> None:
    """vLLM's image runs ENTRYPOINT ["vllm", "serve"] + the command: model id first,
    never a second `serve`, and the entrypoint left alone."""
    command = svc["command"]
    assert isinstance(command, list), "a list, so that JSON values stay one argument"
    assert command[0] == env_example().values["DSV4_MODEL"]
    assert not command[0].startswith("-")
    assert "serve" not in command and "vllm" not in command
    assert "entrypoint" not in svc
    flags(command)  # every other item is a --flag


@pytest.mark.parametrize("flag_list", FLAG_LISTS, ids=lambda p: f"vllm-{p.stem}")
@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_every_flag_is_known_to_vllm(label: str, name: str, svc: dict, flag_list: Path) -> None:
    unknown = set(flags(svc["command"])) - known_flags(flag_list)
    assert not unknown, f"vLLM {flag_list.stem} has no {sorted(unknown)}"


def test_flag_lists_cover_the_default_release_and_the_newest() -> None:
    versions = {p.stem for p in FLAG_LISTS}
    assert env_example().values["DSV4_VLLM_TAG"].removeprefix("v") in versions
    assert "0.34.0" in versions


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_the_dspark_recipe(label: str, name: str, svc: dict) -> None:
    """The setup of #52448 / PR #51318: DSpark-7, FULL_AND_PIECEWISE, 70000, fp8, 256."""
    f = flags(svc["command"])
    spec = json.loads(f["--speculative-config"])
    assert spec == {
        "method": "dspark",
        "num_speculative_tokens": 7,
        "draft_sample_method": "greedy",
        # The drafter is read from the same checkpoint: the same revision, or vLLM
        # loads it from the repository's default branch.
        "revision": f["--revision"],
    }
    assert json.loads(f["--compilation-config"]) == {"cudagraph_mode": "FULL_AND_PIECEWISE"}
    # The model card's use_fp4_indexer_cache is unknown to vLLM >= 0.32 (it refuses
    # the flag), and false was its default: the recipe leaves attention to vLLM.
    assert "--attention-config" not in f
    assert f["--max-model-len"] == "70000"
    assert f["--kv-cache-dtype"] == "fp8"
    assert f["--block-size"] == "256"
    for parser in ("--tokenizer-mode", "--reasoning-parser", "--tool-call-parser"):
        assert f[parser] == "deepseek_v4", parser
    for switch in ("--enable-auto-tool-choice", "--enable-expert-parallel", "--trust-remote-code"):
        assert switch in f and f[switch] is None, switch
    assert "--enforce-eager" not in f, "eager mode suppresses the bug under test"


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_the_checkpoint_revision_is_pinned(label: str, name: str, svc: dict) -> None:
    """A gate must be reproducible out of the box: a commit id, never a branch."""
    revision = flags(svc["command"])["--revision"]
    assert re.fullmatch(COMMIT_ID, revision), revision
    assert revision == env_example().values["DSV4_MODEL_REVISION"]


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_max_num_seqs_holds_every_scenarios_concurrency(label: str, name: str,
                                                         svc: dict) -> None:
    """Explicit, not vLLM's per-GPU default: all of a gate's requests decode together."""
    seqs = int(flags(svc["command"])["--max-num-seqs"])
    for variable in SCENARIO_VARIABLES:
        scenario = load_scenario(env_example().values[variable])
        assert seqs >= scenario.load.concurrency, (variable, scenario.name)

def test_all_servers_share_one_recipe() -> None:
    """Only topology differs, so control, candidate and replicas are comparable."""
    recipes = {
        (label, name): {k: v for k, v in flags(svc["command"]).items() if k not in TOPOLOGY}
        for label, name, svc in SERVERS
    }
    reference = recipes[("compose.yaml", "server")]
    for key, recipe in recipes.items():
        assert recipe == reference, f"{key} differs from compose.yaml:server"


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_plugin_settings(label: str, name: str, svc: dict) -> None:
    env = svc["environment"]
    if name in CONTROLS:
        # v0.27.x's own builder is the buggy one; nothing may hide it.
        assert env["DSV4_QUAL_C128A_LAYOUT"] == "off"
        assert env["DSV4_QUAL_GUARD"] == "0"
    else:
        assert env["DSV4_QUAL_C128A_LAYOUT"] == "capacity"
        assert env["DSV4_QUAL_GUARD"] == "1"
    assert env["DSV4_QUAL_STRICT"] == "1"
    receipts = env["DSV4_QUAL_RECEIPT_DIR"]
    assert any(v.endswith(":" + receipts) for v in svc["volumes"]), "receipts on a volume"


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_breakable_cuda_graphs_are_left_to_vllm(label: str, name: str, svc: dict) -> None:
    """vLLM enables them for DSV4 only if the variable is unset: one of #52448's
    three conditions, so setting it at all could hide the bug from the control."""
    assert "VLLM_USE_BREAKABLE_CUDAGRAPH" not in svc["environment"]


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_what_the_node_gives_the_server(label: str, name: str, svc: dict) -> None:
    assert svc["ipc"] == "host"
    (gpus,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert gpus["driver"] == "nvidia" and gpus["capabilities"] == ["gpu"]
    assert ("count" in gpus) != ("device_ids" in gpus)
    # One id per entry (the Compose specification's form), not "0,1" in one entry.
    assert all(re.fullmatch(r"\d+", i) for i in gpus.get("device_ids", [])), gpus
    assert "HF_TOKEN" in svc["environment"]
    assert any(v.endswith(":/root/.cache/huggingface") for v in svc["volumes"])
    assert svc["ulimits"]["memlock"] == -1


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_api_servers_have_a_patient_health_check(label: str, name: str, svc: dict) -> None:
    f = flags(svc["command"])
    if "--headless" in f:
        assert "healthcheck" not in svc, "a headless node has no HTTP endpoint to probe"
        return
    check = svc["healthcheck"]
    assert f"127.0.0.1:{f['--port']}/health" in " ".join(check["test"])
    # Loading (and on a first run downloading) DSV4 takes far longer than Docker's
    # default; an early "unhealthy" would abort the run.
    assert seconds(check["start_period"]) >= 3600


def test_replicas_that_run_together_do_not_share_gpus() -> None:
    services = model(COMPOSE)["services"]

    def gpus(name: str) -> set[str]:
        (dev,) = services[name]["deploy"]["resources"]["reservations"]["devices"]
        return set(dev["device_ids"])

    for a, b in (("replica-0", "replica-1"), ("replica-control", "replica-1")):
        assert not gpus(a) & gpus(b), f"{a} and {b} share GPUs"
        for name in (a, b):
            f = flags(services[name]["command"])
            tp, dp = int(f["--tensor-parallel-size"]), int(f["--data-parallel-size"])
            assert tp * dp == len(gpus(name)), f"{name}: TP x DP must use its GPUs"


def test_multinode_roles() -> None:
    services = model(MULTINODE)["services"]
    head, worker, hybrid = (flags(services[r]["command"]) for r in ("head", "worker", "hybrid"))
    assert "--headless" not in head and "--data-parallel-start-rank" not in head
    assert "--headless" in worker and "--port" not in worker
    assert "--data-parallel-hybrid-lb" in hybrid and "--headless" not in hybrid
    for role in (head, worker, hybrid):
        assert role["--data-parallel-address"] == "10.0.0.1"
        assert {
            "--data-parallel-size",
            "--data-parallel-size-local",
            "--data-parallel-rpc-port",
        } <= set(role)
    for svc in services.values():
        assert svc["network_mode"] == "host", "other nodes reach the RPC port and NCCL"


def test_server_dockerfile_keeps_vllms_entrypoint() -> None:
    text = DOCKERFILE_SERVER.read_text()
    assert not re.search(r"^\s*(ENTRYPOINT|CMD)\b", text, re.M)
    final_from = re.findall(r"^FROM\s+(\S+)", text, re.M)[-1]
    assert final_from == "${VLLM_IMAGE}:${VLLM_TAG}${VLLM_DIGEST}"


def test_server_image_is_built_from_the_configured_vllm() -> None:
    build = raw(COMPOSE)["services"]["server"]["build"]
    assert build["dockerfile"] == "docker/Dockerfile.server"
    args = model(COMPOSE)["services"]["server"]["build"]["args"]
    assert args["VLLM_TAG"] == env_example().values["DSV4_VLLM_TAG"] == "v0.27.1"


@pytest.mark.parametrize(("label", "name", "svc"), SERVERS, ids=IDS)
def test_jit_caches_are_on_volumes(label: str, name: str, svc: dict) -> None:
    """Compiled kernels (torch.compile, DeepGEMM, FlashInfer, Triton) survive a restart."""
    targets = {v.split(":")[1] for v in svc["volumes"]}
    for cache in JIT_CACHES:
        assert cache in targets, f"{cache} is not on a volume"
    deep_gemm = svc["environment"]["DG_JIT_CACHE_DIR"]
    assert any(deep_gemm.startswith(cache + "/") for cache in JIT_CACHES), deep_gemm


def test_the_download_comes_first_and_fetches_what_the_servers_load() -> None:
    """The engine-ready timeout and the health start period time loading, not a first
    download of ~160 GB: a one-shot service downloads the checkpoint at the servers'
    revision into their cache, and every server waits for it to finish."""
    services = model(COMPOSE)["services"]
    download = services["download"]
    assert download["environment"]["DSV4_MODEL"] == env_example().values["DSV4_MODEL"]
    assert download["environment"]["DSV4_MODEL_REVISION"] == (
        env_example().values["DSV4_MODEL_REVISION"])
    assert "snapshot_download" in " ".join(download["entrypoint"])
    assert "restart" not in download and "healthcheck" not in download
    for name, svc in services.items():
        if name == "download" or "command" not in svc or not svc["image"].startswith(
                env_example().values["DSV4_SERVER_IMAGE"]):
            continue
        assert svc["depends_on"]["download"] == {"condition": "service_completed_successfully"}
        f = flags(svc["command"])
        assert (svc["command"][0], f["--revision"]) == (
            download["environment"]["DSV4_MODEL"], download["environment"]["DSV4_MODEL_REVISION"])
        hf = next(v for v in svc["volumes"] if v.endswith(":/root/.cache/huggingface"))
        assert hf in download["volumes"], name


def test_single_node_servers_are_not_attached_to_up() -> None:
    """`up --exit-code-from X` stops everything when an attached container exits: a
    server that crashed would get the load generator stopped (exit 130 or 137) instead of
    a written, invalid gate. Unattached, only the load generator's exit ends the run."""
    services = model(COMPOSE)["services"]
    for name, svc in services.items():
        if "healthcheck" in svc:
            assert svc["attach"] is False, name
    # The download exits when done, which would end such a run just as early.
    assert services["download"]["attach"] is False


def test_single_node_servers_restart_after_a_crash_a_few_times() -> None:
    """A crash mid-soak is recorded and the soak goes on; a crash loop ends (Compose
    then reports the server instead of waiting on its health for hours)."""
    for name, svc in model(COMPOSE)["services"].items():
        if name == "download" or "healthcheck" not in svc:
            continue
        policy, _, retries = svc["restart"].partition(":")
        assert policy == "on-failure" and 1 <= int(retries) <= 10, (name, svc["restart"])


def test_the_model_cache_is_an_external_volume() -> None:
    """`docker compose down -v` in any checkout must not delete ~160 GB of checkpoint."""
    for path in (COMPOSE, MULTINODE):
        volumes = raw(path)["volumes"]
        assert volumes["hf-cache"] == {"name": "dsv4-qual-hf-cache", "external": True}
