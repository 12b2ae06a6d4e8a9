"""What a round ran on: the node, the GPUs, the image, the model, the scenario as run.

A fleet's history compares rounds across nodes, drivers and images only if each
round says where it ran. Each fact comes from whoever knows it, and a fact nobody
reported stays NULL (shown as unknown), never guessed:

- host: `DSV4_QUAL_HOST` where set (in a container the hostname is the container's
  id, so compose passes the node's name), else this machine's hostname;
- image and digest: `DSV4_QUAL_SERVER_IMAGE` and `DSV4_QUAL_SERVER_IMAGE_DIGEST`, set
  by compose from the image it builds the server from (a URL alone does not say);
- GPUs: the `device` the plugin's receipts record for each process that runs the model
  (name, UUID, driver): the count is the number of distinct GPUs among them;
- model and revision: the checkpoint those processes loaded (receipts), else what
  /v1/models names as the model's root, else the served name; the revision from the
  receipts only;
- scenario hash: sha256 of the scenario as the soak runs it (after command-line
  overrides), less what only says where the server is (URLs, receipts directory, API
  key variable, timeouts) and its name and description: two nodes that run the same
  protocol share it, a changed concurrency or gate does not.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from loadgen.run_facts import node_name
from loadgen.scenario import Scenario
from loadgen.targets.facts import ServerFacts, model_identity
from loadgen.targets.receipts import Device

IMAGE_ENV = "DSV4_QUAL_SERVER_IMAGE"
IMAGE_DIGEST_ENV = "DSV4_QUAL_SERVER_IMAGE_DIGEST"
#: Target settings that say where and how to reach the server, not what is run.
_CONNECTION_KEYS = ("base_urls", "receipts_dir", "api_key_env", "ready_timeout_s",
                    "verify_tls")


def scenario_hash(scenario: Scenario) -> str:
    """sha256 (hex) of the scenario's protocol; see the module docstring."""
    data = scenario.model_dump(mode="json")
    for key in ("name", "description", "soak", "qualify"):
        data.pop(key, None)
    for key in _CONNECTION_KEYS:
        data.get("target", {}).pop(key, None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def node_identity(scenario: Scenario) -> dict[str, Any]:
    """The round columns known before a round starts (history.START_COLUMNS)."""
    digest = (os.environ.get(IMAGE_DIGEST_ENV) or "").strip().lstrip("@") or None
    return {
        "host": node_name(),
        "image": (os.environ.get(IMAGE_ENV) or "").strip() or None,
        "image_digest": digest,
        "scenario_hash": scenario_hash(scenario),
    }


def server_columns(server: ServerFacts, model_name: str | None) -> dict[str, Any]:
    """The round columns the server's own facts give (GPUs, model, revision)."""
    identity = model_identity(model_name or "", server)
    model = ",".join(identity.models or identity.roots) or model_name or None
    devices = [d for d in _model_devices(server) if d.name or d.driver]
    names = sorted({d.name for d in devices if d.name})
    drivers = sorted({d.driver for d in devices if d.driver})
    uuids = {d.uuid for d in devices if d.uuid}
    return {
        "model": model,
        "model_revision": ",".join(identity.revisions) or None,
        "gpu_name": ",".join(names) or None,
        # Counted only where every device names its UUID: two workers on one GPU are one.
        "gpu_count": len(uuids) if devices and len(uuids) and
        all(d.uuid for d in devices) else None,
        "gpu_driver": ",".join(drivers) or None,
    }


def _model_devices(server: ServerFacts) -> list[Device]:
    """The `device` of each counted receipt of a process that loaded the model."""
    return [p.device for p in server.receipts.model_processes if p.device]
