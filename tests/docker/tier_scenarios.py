"""The scenarios the docker tier runs in the load generator's container.

Each replays one request body (so every record's origin is known) against the tiny
model (tests/vllm/tiny_model.py), whose greedy reply is reasoning that never ends:

- `clean`: a logit bias towards `</think>`: content follows the reasoning, nothing is
  stuck; a candidate gate on `stuck_in_reasoning` passes (exit 0);
- `stuck`: every special token banned: each reply is capped by max_tokens inside the
  reasoning channel, the #52448 signature; the same gate fails (exit 1);
- `long`: the clean load, long enough to kill the server in the middle; its restart
  rule is the shipped release gate's (`load.on_server_restart`), so the tier tests
  what operators run;
- `soak`: short rounds with the nightly soak's restart rule, a fixed number of them.

Every gate requires the plugin's receipts, read from the receipts volume. The tiny
model has random weights: what it writes after `</think>` is noise by construction
(random tokens, `</think>` again, cut by max_tokens). This tier proves the compose path
and the #52448 signature, so its gates gate `stuck_in_reasoning` and name every other
failure verdict in `gate.ignore`: the statement lists what was detected but not gated
(the test reads it). Scenario files are written here (tests.support.scenario_files,
nothing from the model's defaults); the loadgen in the container validates them.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from capture_fixtures import BAN_SPECIALS, MESSAGES, TOWARDS_THINK_END

from loadgen.taxonomy import DEFAULT_FAIL_ON, Verdict
from tests.support.scenario_files import BARE, scenario_toml

REPO = Path(__file__).resolve().parents[2]
MODEL = "tiny"
MAX_TOKENS = 24
CONCURRENCY = 4
GATED = Verdict.STUCK_IN_REASONING.value
#: What the noise of random weights trips, on purpose not gated here (see above).
IGNORED = tuple(sorted(v.value for v in DEFAULT_FAIL_ON if v.value != GATED))
SOAK_ROUNDS = 4
# In the container: compose.cpu.yaml mounts the folder here.
MOUNT = "/scenarios"


@dataclass(frozen=True)
class TierScenario:
    name: str
    body: dict[str, object]
    measurement: int
    on_server_restart: str
    soak: dict[str, object] | None = None

    @property
    def container_path(self) -> str:
        return f"{MOUNT}/{self.name}.toml"

    def toml(self) -> str:
        return scenario_toml(
            BARE, description=f"docker tier: {self.name} (tests/docker/tier_scenarios.py)",
            target={"model": MODEL, "ready_timeout_s": 120},
            load={"concurrency": CONCURRENCY, "priming": 0, "measurement": self.measurement,
                  "on_server_restart": self.on_server_restart,
                  "restart_ready_timeout_s": 300},
            request={"max_tokens": MAX_TOKENS, "temperature": self.body["temperature"]},
            workload={"kind": "replay", "path": f"{self.name}.jsonl"},
            gate={"role": "candidate", "fail_on": [GATED], "ignore": list(IGNORED),
                  "allowed": 0, "max_infra_errors": 0, "prove_below": 0.5,
                  "require_receipts": True},
            soak=self.soak)


def shipped_restart_rule(name: str) -> str:
    """`load.on_server_restart` of a scenario the project ships."""
    with open(REPO / "scenarios" / f"{name}.toml", "rb") as handle:
        return str(tomllib.load(handle)["load"]["on_server_restart"])


def _body(logit_bias: dict[str, float], temperature: float) -> dict[str, object]:
    return {"model": MODEL, "messages": MESSAGES, "max_tokens": MAX_TOKENS,
            "temperature": temperature, "seed": 7, "logit_bias": logit_bias}


CLEAN = TierScenario("clean", _body(TOWARDS_THINK_END, 1.0), 8,
                     shipped_restart_rule("release-gate"))
STUCK = TierScenario("stuck", _body(BAN_SPECIALS, 0.0), 8,
                     shipped_restart_rule("release-gate"))
LONG = TierScenario("long", _body(TOWARDS_THINK_END, 1.0), 5000,
                    shipped_restart_rule("release-gate"))
# ~10 s a round on two cores: time to kill the server in the middle of one.
SOAK = TierScenario("soak", _body(TOWARDS_THINK_END, 1.0), 600,
                    shipped_restart_rule("nightly-soak"),
                    soak={"rounds": SOAK_ROUNDS})
ALL = (CLEAN, STUCK, LONG, SOAK)


def write_all(folder: Path) -> Path:
    """Every scenario and its request bodies into `folder` (mounted into the loadgen)."""
    folder.mkdir(parents=True, exist_ok=True)
    for scenario in ALL:
        bodies = "\n".join(json.dumps(scenario.body) for _ in range(16)) + "\n"
        for path, text in ((folder / f"{scenario.name}.jsonl", bodies),
                           (folder / f"{scenario.name}.toml", scenario.toml())):
            path.write_text(text)
            path.chmod(0o644)
    return folder
