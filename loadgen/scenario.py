"""Scenario files (TOML) -> one validated, immutable configuration.

A scenario is the protocol a user runs: which server, how much load, which requests,
and what the gate accepts. Everything a user can get wrong is caught here, before a
single request is sent, and reported as one line naming the file, the key and the
problem (exit code 3).
"""

from __future__ import annotations

import difflib
import tomllib
import typing
from collections.abc import Iterable
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from loadgen.bounds import required_measured
from loadgen.durations import parse_duration
from loadgen.exit_codes import BadInputError
from loadgen.judge.reply import VerdictConfig
from loadgen.load_claim import ACCEPT_FLAG, LoadClaim
from loadgen.taxonomy import DEFAULT_FAIL_ON, FAILURE_VERDICTS, OPT_IN, SEVERITY, Verdict

# Bounds that catch typos (an extra zero, a negative sign) without getting in the way
# of real soaks.
MAX_CONCURRENCY = 100_000
MAX_COUNT = 100_000_000
MAX_TOKENS = 10_000_000
MAX_TIMEOUT_S = 7 * 24 * 3600.0

PositiveSeconds = Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class _Strict(BaseModel):
    """Unknown keys are errors: a misspelt key silently ignored would change a verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


def http_urls(urls: list[str]) -> list[str]:
    """Base URLs without their trailing slash; one that cannot reach a server is refused
    here, before anything waits on it.

    The base URL is the server's root: the client adds `/v1/...` itself, so one that
    ends in `/v1` would ask for `/v1/v1/models` and wait out the whole ready timeout on
    404s. A port that is not one (`:abc`, `:0`, `:99999`) is refused with the same care.
    """
    cleaned = []
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if port is not None and not 1 <= port <= 65535:
            raise ValueError(f"{url!r}: the port must be a number from 1 to 65535")
        if not parts.hostname:
            raise ValueError(f"{url!r} names no host")
        segments = parts.path.split("/")
        if "v1" in segments:
            root = f"{parts.scheme}://{parts.netloc}{'/'.join(segments[:segments.index('v1')])}"
            raise ValueError(f"{url!r}: a base URL is the server's root, without /v1 "
                             f"(dsv4-qual adds /v1/...): use {root!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"{url!r}: a base URL has no ?query or #fragment")
        cleaned.append(url.rstrip("/"))
    return cleaned


class Role(StrEnum):
    """Which side of a qualification a run is: the value is the scenario's `gate.role`."""

    CONTROL = "control"  # the bug left in: its gate proves the run can see the bug
    CANDIDATE = "candidate"  # the server to qualify: its gate proves a bound on failures


class SimTarget(_Strict):
    """Start the embedded reference server in-process for the run and stop it after."""

    layout: Literal["packed", "capacity", "prefix"] = "capacity"
    device: Literal["cpu", "cuda"] = "cpu"
    max_num_seqs: int = Field(default=32, ge=1, le=4096)
    max_model_len: int = Field(default=4096, ge=64, le=1_048_576)
    guard: bool = True
    graph_mode: Literal["full_and_piecewise", "full"] = "full_and_piecewise"
    salad_foreign_share: float = Field(default=0.5, ge=0.0, le=1.0)
    cross_talk_foreign_share: float = Field(default=0.7, ge=0.0, le=1.0)
    fatal_foreign_share: float = Field(default=0.9, ge=0.0, le=1.0)
    prefix_caching: bool = Field(
        default=False, description="vLLM's automatic prefix caching (the sessions' face).")
    indexer: Literal["runtime", "captured"] = Field(
        default="runtime",
        description="The sparse indexer's short-context shortcut: decided at runtime (the "
        "fix of vLLM #52492) or captured into the graph a short prefill replays (the bug: "
        "a cached prefix over 2048 tokens reads the wrong candidates).")
    reproduces: Literal["c128a", "indexer"] = Field(
        default="c128a",
        description="Which bug a qualification's control leaves in: the C128A packed "
        "layout (#52448) or the captured indexer shortcut (#52492, with the prefix cache).")

    def playing(self, role: Role) -> SimTarget:
        """This sim as one side of a qualification: the bug it `reproduces` left in for
        the control (so the run must see it: the packed builder, or the captured indexer
        shortcut), the fix for the candidate (capacity stride, the indexer at runtime)."""
        control = role == Role.CONTROL
        update: dict[str, Any] = {"layout": "capacity", "indexer": "runtime"}
        if control:
            update[{"c128a": "layout", "indexer": "indexer"}[self.reproduces]] = (
                "packed" if self.reproduces == "c128a" else "captured")
        return self.model_copy(update=update)


class TargetConfig(_Strict):
    base_urls: list[str] = Field(
        default_factory=list,
        description="One or more OpenAI-compatible base URLs (data-parallel replicas are "
        "driven round-robin). Empty when --base-url or [target.sim] provides it.",
    )
    model: str = Field(default="auto", min_length=1)
    api_key_env: str | None = Field(
        default=None,
        description="The NAME of the environment variable that holds the API key; "
        "the key itself never belongs in a scenario file.",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
    )
    ready_timeout_s: PositiveSeconds = 600.0
    verify_tls: bool = True
    receipts_dir: str | None = Field(
        default=None, description="Directory where the server's patch receipts appear."
    )
    sim: SimTarget | None = None

    @field_validator("base_urls")
    @classmethod
    def _urls_are_http(cls, urls: list[str]) -> list[str]:
        return http_urls(urls)

    def embedded(self) -> tuple[str, dict[str, Any]] | None:
        """The embedded server the run starts (its registered name and its options), or
        None when the target is given by URL: a URL always wins, so a scenario's sim can
        be pointed at a real server from the command line."""
        if self.base_urls or self.sim is None:
            return None
        return "sim", self.sim.model_dump()


class LoadConfig(_Strict):
    concurrency: int = Field(default=8, ge=1, le=MAX_CONCURRENCY)
    rate_limit: float = Field(
        default=0.0, ge=0, le=1_000_000, description="Requests per second; 0 is unlimited."
    )
    priming: Count = 0
    measurement: int = Field(default=64, ge=1, le=MAX_COUNT)
    connect_timeout_s: PositiveSeconds = 10.0
    idle_connection_s: PositiveSeconds = Field(
        default=3.0,
        description="A kept connection idle this long is closed, not reused: keep it below "
        "the server's keep-alive timeout (vLLM and uvicorn: 5 s), so a session that "
        "thinks longer never sends on a socket the server is closing.")
    first_token_timeout_s: PositiveSeconds = 300.0
    idle_timeout_s: PositiveSeconds = 120.0
    total_timeout_s: PositiveSeconds = 3600.0
    on_server_restart: Literal["continue", "invalid"] = "continue"
    restart_ready_timeout_s: PositiveSeconds = 600.0


class RequestConfig(_Strict):
    max_tokens: int = Field(default=4096, ge=1, le=MAX_TOKENS)
    temperature: float = Field(default=0.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: int | None = None
    stream: bool = True
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    reasoning_switch: str = Field(
        default="thinking", min_length=1,
        description="The chat_template_kwargs key that turns reasoning on and off, where a "
        "workload sends requests with reasoning on and off (DeepSeek-V4 on vLLM: "
        "thinking).")
    extra_body: dict[str, Any] = Field(default_factory=dict)


class ToolTurnWorkload(_Strict):
    """A multi-turn chat with tools whose healthy reply is one short tool call (#52448)."""

    kind: Literal["tool-turn"]
    seed: int = 0
    variant: Literal["as-reported", "per-request"] = Field(
        default="as-reported",
        description="as-reported: #52448's turn (upgrade to business). per-request: every "
        "request its own account and plan, the account named only early in the turn.",
    )
    accounts: int = Field(
        default=1,
        ge=1,
        le=1_000_000,
        description="Distinct account ids (distinct requests); 1 sends identical bodies "
        "(greedy divergence check).",
    )

    @model_validator(mode="after")
    def _per_request_needs_requests(self) -> ToolTurnWorkload:
        if self.variant == "per-request" and self.accounts < 2:
            raise ValueError("variant 'per-request' needs accounts >= 2 (distinct requests "
                             "to tell apart)")
        return self


class LongContextWorkload(_Strict):
    """Documents padded to a spread of context lengths, so a batch mixes long and short."""

    kind: Literal["long-context"]
    seed: int = 0
    context_tokens: list[Annotated[int, Field(ge=16, le=10_000_000)]] = Field(
        default_factory=lambda: [512, 2048, 8192], min_length=1
    )
    weights: list[Annotated[float, Field(gt=0)]] | None = None
    tools: bool = True

    @model_validator(mode="after")
    def _weights_match(self) -> LongContextWorkload:
        if self.weights is not None and len(self.weights) != len(self.context_tokens):
            raise ValueError("weights must have one entry per context_tokens entry")
        return self


class ReplayWorkload(_Strict):
    """A JSONL file of request bodies captured from production, sent as they are."""

    kind: Literal["replay"]
    path: str = Field(min_length=1)
    seed: int = 0
    shuffle: bool = False


Probe = Literal["echo", "needle", "lookup", "computed"]
ReasoningMode = Literal["on", "off"]


def _distinct(values: list[Any], what: str) -> list[Any]:
    if len(set(values)) != len(values):
        raise ValueError(f"{what}: each value once")
    return values


class KnownAnswerWorkload(_Strict):
    """Requests whose answers are known and checked exactly: identifiers echoed, a
    needle in long prompts, a catalog lookup, sums, dates and a computed tool call."""

    kind: Literal["known-answer"]
    seed: int = 0
    probes: list[Probe] = Field(
        default_factory=lambda: list(typing.get_args(Probe)), min_length=1,
        description="The probe families, interleaved in this order.")
    needle_tokens: list[Annotated[int, Field(ge=64, le=10_000_000)]] = Field(
        default_factory=lambda: [1024, 4096], min_length=1,
        description="Prompt lengths of the needle probe; each is sent in four variants "
        "one filler word apart, so the prompt lengths cover every residue mod 4.")
    needle_depths: list[Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=lambda: [0.1, 0.5, 0.9], min_length=1,
        description="Where in the prompt the needle sits (0: the start, 1: the end).")
    reasoning: list[ReasoningMode] = Field(
        default_factory=lambda: list(typing.get_args(ReasoningMode)), min_length=1,
        description="Each probe is sent with reasoning in each of these modes.")
    catalog_rows: int = Field(default=24, ge=4, le=96)

    @field_validator("probes", "reasoning", "needle_tokens", "needle_depths")
    @classmethod
    def _each_once(cls, values: list[Any]) -> list[Any]:
        return _distinct(values, "list")


class SessionWorkload(_Strict):
    """Agentic sessions, run as DeepSeek-V4 agents run: each plants facts of its own,
    loops through tools (the prompt grows by appending) and takes new user turns (the
    template rewrites the prompt from the previous user message), over a long system and
    tools prefix every session shares; every turn's answer is checked."""

    kind: Literal["session"]
    seed: int = 0
    sessions: int = Field(default=16, ge=1, le=1_000_000,
                          description="Distinct sessions before the workload repeats.")
    turns: int = Field(default=8, ge=2, le=8, description="Turns (requests) per session.")
    shared_prefix_tokens: list[Annotated[int, Field(ge=64, le=10_000_000)]] = Field(
        default_factory=lambda: [1024, 3072], min_length=1,
        description="Sizes of the system and tools prefix the sessions share (sessions "
        "take them in turn); above and below 2048 tokens: vLLM #52492 showed only with a "
        "cached prefix longer than 2048.")
    think_time_s: list[Annotated[float, Field(ge=0, le=3600)]] = Field(
        default_factory=lambda: [0.5, 2.0], min_length=2, max_length=2,
        description="[least, most] seconds a session thinks before each next turn "
        "(drawn per turn from the seed).")

    @model_validator(mode="after")
    def _think_range(self) -> SessionWorkload:
        low, high = self.think_time_s
        if low > high:
            raise ValueError("think_time_s: [least, most], least first")
        return self


Part = Annotated[
    ToolTurnWorkload | LongContextWorkload | KnownAnswerWorkload | SessionWorkload
    | ReplayWorkload, Field(discriminator="kind")
]


class MixWorkload(_Strict):
    """Several workloads in one run, by share of requests (a session goes whole)."""

    kind: Literal["mix"]
    parts: list[Part] = Field(min_length=1)
    weights: list[Annotated[float, Field(gt=0)]] | None = Field(
        default=None, description="Each part's share of the requests (default: equal).")

    @model_validator(mode="after")
    def _weights_match(self) -> MixWorkload:
        if self.weights is not None and len(self.weights) != len(self.parts):
            raise ValueError("weights must have one entry per part")
        return self


Workload = Annotated[
    ToolTurnWorkload | LongContextWorkload | ReplayWorkload | KnownAnswerWorkload
    | SessionWorkload | MixWorkload, Field(discriminator="kind")
]


#: The C128A layouts a candidate's model processes may run; `packed` is the bug itself.
ACCEPTABLE_LAYOUTS = ("capacity", "prefix")


class GateConfig(_Strict):
    role: Role = Role.CANDIDATE
    fail_on: list[Verdict] | None = Field(
        default=None,
        description="A control: the verdicts that count as reproducing the bug (default: "
        "every failure verdict). A candidate: verdicts to gate beyond the failure verdicts, "
        "which all gate anyway (e.g. divergent); it never removes one: see `ignore`.",
    )
    ignore: list[Verdict] = Field(
        default_factory=list,
        description="Failure verdicts this gate accepts, named one by one: every other "
        "failure verdict gates, those added later included. The statement names what was "
        "detected but not gated.",
    )
    allowed: Count = 0
    max_infra_errors: Count = 0
    prove_below: float = Field(
        default=0.05, gt=0, lt=1,
        description="A candidate passes only when the exact 95% upper bound of its failure "
        "rate is below this; the measured requests it needs follow from it and `allowed`.",
    )
    min_measured: int | None = Field(
        default=None, ge=1, le=MAX_COUNT,
        description="A floor on measured requests on top of what prove_below needs.",
    )
    require_receipts: bool = False
    accept_layouts: list[str] = Field(
        default_factory=lambda: list(ACCEPTABLE_LAYOUTS), min_length=1,
        description="C128A layouts a candidate's model processes may run; upstream's own "
        "builder (layout off) counts when its release writes one of these and the stride "
        "guard saw its calls and no violation.",
    )
    require_prefix_reuse: bool = Field(
        default=False,
        description="Demand that the server's prefix cache served part of the measured "
        "prompts (its vllm:prefix_cache_* counters): a run that cannot show it reused a "
        "prefix did not test the prefix-cache paths (vLLM #52492) and is invalid (exit 2).")
    fail_on_stride_violations: bool = Field(
        default=False,
        description="Demand that the plugin's stride guard saw C128A builder calls: a "
        "guard that reported none makes the run invalid (exit 2), even for a model "
        "without C128A layers. Violations fail every candidate whose receipts are counted "
        "whatever this says; on, they are also their own check.",
    )

    @field_validator("fail_on")
    @classmethod
    def _no_ok(cls, verdicts: list[Verdict] | None) -> list[Verdict] | None:
        if verdicts is not None and Verdict.OK in verdicts:
            raise ValueError("'ok' cannot fail a run")
        return verdicts

    @field_validator("ignore")
    @classmethod
    def _failures_only(cls, verdicts: list[Verdict]) -> list[Verdict]:
        for verdict in verdicts:
            if verdict in OPT_IN:
                raise ValueError(f"{verdict.value!r} does not gate unless gate.fail_on names "
                                 "it: there is nothing to ignore")
            if verdict not in FAILURE_VERDICTS:
                raise ValueError(f"{verdict.value!r} is not a failure verdict a gate could "
                                 "ignore (infrastructure errors: gate.max_infra_errors)")
        return verdicts

    @model_validator(mode="after")
    def _not_both(self) -> GateConfig:
        both = sorted(set(self.fail_on or ()) & set(self.ignore))
        if both:
            raise ValueError(f"gate.fail_on and gate.ignore both name {', '.join(both)}")
        return self

    def gated(self) -> list[Verdict]:
        """What this gate counts, most severe first.

        A candidate gates every failure verdict (`DEFAULT_FAIL_ON`, derived from the
        taxonomy: a verdict added after the scenario was written gates too), the opt-in
        ones `fail_on` adds, minus what `ignore` names. A control counts what `fail_on`
        says reproduces the bug (every failure verdict by default), minus `ignore`."""
        if self.role == Role.CONTROL and self.fail_on is not None:
            counted = set(self.fail_on)
        else:
            counted = set(DEFAULT_FAIL_ON) | set(self.fail_on or ())
        counted -= set(self.ignore)
        return [v for v in SEVERITY if v in counted]

    @field_validator("accept_layouts")
    @classmethod
    def _layouts(cls, layouts: list[str]) -> list[str]:
        for layout in layouts:
            if layout == "packed":
                raise ValueError("'packed' is the #52448 bug: it never passes as a candidate")
            if layout not in ACCEPTABLE_LAYOUTS:
                raise ValueError(f"{layout!r} is not a C128A layout a candidate may run "
                                 f"(choose from {', '.join(ACCEPTABLE_LAYOUTS)})")
        return layouts

    def required_measured(self) -> int:
        """Measured requests a run of this gate needs: for a candidate, what proving
        `prove_below` takes at `allowed` failures; at least `min_measured`; never below 1."""
        floor = self.min_measured or 1
        if self.role == Role.CONTROL:
            return floor
        needed = required_measured(self.prove_below, self.allowed)
        if needed is None:
            raise ValueError(f"gate.allowed {self.allowed} failures can never prove a rate "
                             f"below {self.prove_below:g}")
        return max(floor, needed)


class TelemetryConfig(_Strict):
    """The server's side. Which patch receipts count is no setting: a receipt counts when
    it names the server start a measured endpoint exports on /metrics (targets.epochs)."""

    scrape_interval_s: float = Field(default=10.0, ge=0, le=MAX_TIMEOUT_S)


class QualifySide(_Strict):
    """One side of a qualification: where it runs, and what its gate demands of receipts."""

    base_urls: list[str] = Field(default_factory=list)
    receipts_dir: str | None = None
    sim: SimTarget | None = None
    require_receipts: bool | None = Field(
        default=None,
        description="Default: false for the control (layout `off` writes none), the "
        "scenario's gate.require_receipts for the candidate.",
    )

    @field_validator("base_urls")
    @classmethod
    def _urls_are_http(cls, urls: list[str]) -> list[str]:
        return http_urls(urls)


class QualifyConfig(_Strict):
    """`dsv4-qual qualify`: a positive control that must reproduce, then the candidate."""

    control: QualifySide = Field(default_factory=QualifySide)
    candidate: QualifySide = Field(default_factory=QualifySide)
    control_fail_on: list[Verdict] = Field(
        default_factory=lambda: [Verdict.STUCK_IN_REASONING],
        description="What counts as the control reproducing the bug (#52448's signature).",
    )
    control_allowed: Count = Field(
        default=0, description="The control reproduces when more than this many fail.")
    allow_different_models: bool = Field(
        default=False,
        description="Qualify even when the control and the candidate do not serve the same "
        "model (name, /v1/models root, the model and revision the receipts name). Off, a "
        "control of another model makes the qualification invalid: its reproduction says "
        "nothing about the candidate's model.",
    )

    @field_validator("control_fail_on")
    @classmethod
    def _no_ok(cls, verdicts: list[Verdict]) -> list[Verdict]:
        if not verdicts:
            raise ValueError("name at least one verdict")
        if Verdict.OK in verdicts:
            raise ValueError("'ok' cannot reproduce a bug")
        return verdicts


class ReferenceConfig(_Strict):
    """The same server alone is the oracle: a sample of the measured bodies, each sent
    once with nothing else in flight, and every loaded reply compared with its solo one."""

    requests: int = Field(
        default=0, ge=0, le=MAX_COUNT,
        description="Distinct measured bodies sent one at a time to the idle server "
        "(fewer when the workload has fewer distinct bodies); 0 switches the phase off.",
    )
    when: Literal["before", "after"] = Field(
        default="after",
        description="before: ahead of priming (the server is fresh); after: once "
        "measurement is over (the server has this run's history, nothing in flight).",
    )
    batch_invariant: bool = Field(
        default=False,
        description="The server is declared batch-invariant (e.g. VLLM_BATCH_INVARIANT=1): "
        "a loaded reply must then match its solo reply word for word, not only in its "
        "verifiable fields.",
    )
    min_acceptance_ratio: float = Field(
        default=0.5, ge=0, le=1,
        description="Speculative decoding's acceptance rate under load must be at least "
        "this share of the reference phase's (when both phases drafted tokens).",
    )


class SoakConfig(_Strict):
    """`dsv4-qual soak` defaults; --duration/--rounds/--stop-on-breach override them."""

    duration: str | None = Field(default=None, description="e.g. 8h, 90m, 1h30m")
    rounds: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    stop_on_breach: bool = False

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value


class Scenario(_Strict):
    name: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$")
    description: str = ""
    target: TargetConfig = Field(default_factory=TargetConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    request: RequestConfig = Field(default_factory=RequestConfig)
    workload: Workload = Field(default_factory=lambda: ToolTurnWorkload(kind="tool-turn"))
    gate: GateConfig = Field(default_factory=GateConfig)
    verdicts: VerdictConfig = Field(default_factory=VerdictConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    reference: ReferenceConfig = Field(default_factory=ReferenceConfig)
    qualify: QualifyConfig | None = None
    soak: SoakConfig | None = None
    # The load as the scenario file ships it, once the command line changed it, and
    # whether a weaker load was accepted (`load_claim`).
    _shipped_load: dict[str, Any] | None = PrivateAttr(default=None)
    _weaker_accepted: bool = PrivateAttr(default=False)

    def load_values(self) -> dict[str, Any]:
        """The load settings its claim rests on (`load_claim.CLAIM_KEYS`)."""
        return {"concurrency": self.load.concurrency, "priming": self.load.priming,
                "measurement": self.load.measurement, "max_tokens": self.request.max_tokens,
                "rate_limit": self.load.rate_limit}

    def revalidated(self, data: dict[str, Any]) -> Scenario:
        """`data` (this scenario's dump, changed) as a scenario that keeps this one's
        shipped load: a derived scenario (a qualify side) still states what was shipped."""
        scenario = Scenario.model_validate(data)
        scenario._shipped_load = self._shipped_load
        scenario._weaker_accepted = self._weaker_accepted
        return scenario

    def primed_earlier(self) -> Scenario:
        """A soak round on a server an earlier round already primed: no priming of its
        own, and none owed (the server's history since its start is its priming)."""
        scenario = self.model_copy(update={"load": self.load.model_copy(update={"priming": 0})})
        scenario._shipped_load = {**(self._shipped_load or self.load_values()), "priming": 0}
        return scenario

    def load_claim(self) -> LoadClaim:
        """The shipped load beside the effective one."""
        return LoadClaim(self._shipped_load or self.load_values(), self.load_values(),
                         self._weaker_accepted)

    @model_validator(mode="after")
    def _enough_to_prove(self) -> Scenario:
        needed = self.gate.required_measured()
        if self.load.measurement < needed:
            if self.gate.role == Role.CONTROL:
                raise ValueError(f"load.measurement {self.load.measurement} is below "
                                 f"gate.min_measured {needed}")
            raise ValueError(
                f"load.measurement {self.load.measurement}: too few to prove a failure rate "
                f"below {100 * self.gate.prove_below:g}% (gate.prove_below) with "
                f"{self.gate.allowed} allowed: a candidate needs at least {needed} measured "
                "requests")
        return self

    def with_overrides(self, accept_weaker_load: bool = False, **overrides: Any) -> Scenario:
        """Apply command-line overrides (None means 'not given') and validate again.

        An override that weakens the scenario's load is refused (BadInputError) unless
        `accept_weaker_load`; the shipped load travels with the result (`load_claim`)."""
        data = self.model_dump(mode="python")
        mapping = {
            "base_urls": ("target", "base_urls"),
            "model": ("target", "model"),
            "api_key_env": ("target", "api_key_env"),
            "concurrency": ("load", "concurrency"),
            "priming": ("load", "priming"),
            "measurement": ("load", "measurement"),
            "rate_limit": ("load", "rate_limit"),
            "max_tokens": ("request", "max_tokens"),
            "verify_tls": ("target", "verify_tls"),
            "ready_timeout": ("target", "ready_timeout_s"),
            "receipts_dir": ("target", "receipts_dir"),
        }
        for key, value in overrides.items():
            if value is None or (key == "base_urls" and not value):
                continue
            section, field = mapping[key]
            data[section][field] = list(value) if key == "base_urls" else value
            if key == "ready_timeout":  # every wait for readiness, a restart's too
                data["load"]["restart_ready_timeout_s"] = value
        try:
            scenario = Scenario.model_validate(data)
        except ValidationError as exc:
            raise BadInputError(f"command line: {_first_problem(exc)}") from None
        scenario._shipped_load = self._shipped_load or self.load_values()
        scenario._weaker_accepted = self._weaker_accepted or accept_weaker_load
        claim = scenario.load_claim()
        if claim.weakened and not scenario._weaker_accepted:
            raise BadInputError(
                f"command line: {'; '.join(claim.weakened)} weakens the scenario's claim; "
                f"pass {ACCEPT_FLAG} to run it anyway (every report will say the claim "
                "does not hold as shipped)")
        return scenario


def _first_problem(exc: ValidationError) -> str:
    """Turn pydantic's report into 'key.path: problem' (one line, the first error)."""
    err = exc.errors()[0]
    # Discriminated unions put the tag in the path ("workload.tool-turn.seed"); drop it.
    tags = {"tool-turn", "long-context", "replay", "known-answer", "session", "mix"}
    loc = ".".join(str(p) for p in err["loc"]
                   if not str(p).startswith("function-") and str(p) not in tags)
    if err["type"] == "extra_forbidden":
        problem = "unknown key" + _did_you_mean(
            str(err["loc"][-1]), _known_keys([p for p in err["loc"][:-1]
                                              if not str(p).startswith("function-")]))
    elif err["type"] == "missing":
        problem = "required key is missing"
    else:
        problem = err["msg"].removeprefix("Value error, ")
        if "input" in err and not isinstance(err["input"], dict | list):
            problem += f" (got {err['input']!r})"
    return f"{loc}: {problem}" if loc else problem


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    """The closest known spelling, as the CLI's own options offer one."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The scenario sections an annotation can hold (through Optional, unions, lists)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _known_keys(loc: list[Any]) -> set[str]:
    """The keys a scenario accepts at `loc` (a discriminated union's tag names the member)."""
    models: list[type[BaseModel]] = [Scenario]
    for part in loc:
        if not isinstance(part, str):
            continue  # a list index: the same models
        tagged = [m for m in models for name, field in m.model_fields.items()
                  if name == "kind" and part in typing.get_args(field.annotation)]
        if tagged:
            models = tagged
            continue
        models = [inner for m in models if part in m.model_fields
                  for inner in _models_in(m.model_fields[part].annotation)]
    return {name for m in models for name in m.model_fields}


def shipped_scenarios() -> list[str]:
    """The bare names `run NAME` accepts here, for an error that lists them."""
    names = {path.stem for directory in scenario_search_dirs() if directory.is_dir()
             for path in directory.glob("*.toml")}
    return sorted(names)


def scenario_search_dirs() -> list[Path]:
    """Where bare scenario names (e.g. `smoke`) are looked up, in order."""
    dirs = [Path.cwd() / "scenarios"]
    source_tree = Path(__file__).resolve().parent.parent / "scenarios"
    dirs.append(source_tree)
    try:
        bundled = resources.files("loadgen") / "bundled_scenarios"
        dirs.append(Path(str(bundled)))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - odd installs
        pass
    return dirs


def resolve_scenario_path(ref: str | Path) -> Path:
    """A path as given, or a bare name looked up in the shipped scenarios."""
    path = Path(ref)
    try:
        exists = path.exists()
    except OSError as exc:  # e.g. a folder on the way that this user may not read
        raise BadInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if exists or path.suffix or "/" in str(ref):
        return path
    for directory in scenario_search_dirs():
        candidate = directory / f"{ref}.toml"
        if candidate.is_file():
            return candidate
    return path


def _shipped_hint(ref: str | Path) -> str:
    """The shipped scenario the user most likely meant, and for a bare name the list.

    `smoke.toml` typed where `smoke` was meant, or `SMOKE`, names a shipped scenario in
    all but spelling: the name is compared case-folded, as its file's stem. A path of
    the user's own that names no shipped scenario gets no guess.
    """
    names = shipped_scenarios()
    if not names:
        return ""
    path = Path(ref)
    is_path = bool(path.suffix) or "/" in str(ref)
    stem = path.stem if path.suffix == ".toml" else path.name
    folded = {name.casefold(): name for name in names}
    same = folded.get(stem.casefold())
    if is_path:
        return f" (did you mean the shipped scenario {same!r}?)" if same else ""
    if same is None:
        close = difflib.get_close_matches(stem.casefold(), sorted(folded), n=1, cutoff=0.6)
        same = folded[close[0]] if close else None
    guess = f" (did you mean {same!r}?)" if same else ""
    return f"{guess}; shipped scenarios: {', '.join(names)}"


def load_scenario(ref: str | Path) -> Scenario:
    """Read and validate a scenario file; every problem becomes one BadInputError line."""
    path = resolve_scenario_path(ref)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInputError(f"{path}: no such scenario file{_shipped_hint(ref)}") from None
    except IsADirectoryError:
        raise BadInputError(f"{path}: is a directory, not a scenario file") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInputError(f"{path}: invalid TOML: {exc}") from None
    data.setdefault("name", path.stem)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise BadInputError(f"{path}: {_first_problem(exc)}") from None
    workload = _replays_resolved(scenario.workload, path)
    if workload is not scenario.workload:
        scenario = scenario.model_copy(update={"workload": workload})
    return scenario


def _replays_resolved(workload: Any, path: Path) -> Any:
    """The workload with every replay file (a mix's parts too) as a path resolved
    against the scenario file's folder; a missing one is bad input."""
    if isinstance(workload, MixWorkload):
        parts = [_replays_resolved(part, path) for part in workload.parts]
        if all(a is b for a, b in zip(parts, workload.parts, strict=True)):
            return workload
        return workload.model_copy(update={"parts": parts})
    if not isinstance(workload, ReplayWorkload):
        return workload
    replay = Path(workload.path)
    if not replay.is_absolute():
        replay = (path.parent / replay).resolve()
    if not replay.is_file():
        raise BadInputError(f"{path}: workload.path: no such file {str(replay)!r}")
    return workload.model_copy(update={"path": str(replay)})
