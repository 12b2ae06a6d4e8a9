"""The `dsv4-qual` command line: one console script, one sub-command per job."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loadgen import __version__
from loadgen.engine.transport import TRANSPORTS
from loadgen.exit_codes import BadInputError, DsvQualError, ExitCode
from loadgen.targets.embedded import SERVER_EXTRA

if TYPE_CHECKING:  # the scenario brings the judge's rules: loaded by the commands that read one
    from loadgen.scenario import Scenario

COMMAND_PLUGINS_GROUP = "dsv4_qual.commands"


def _options(*options: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Declare a group of options once, for every command that takes them."""

    def apply(func: Any) -> Any:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


#: The environment variable that may hold the base URLs (a CI job's, a container's).
BASE_URL_ENV = "DSV4_QUAL_BASE_URL"

#: Where the requests go (run, soak; qualify names its two sides its own way).
target_options = _options(
    click.option("--base-url", "base_urls", multiple=True, metavar="URL",
                 envvar=BASE_URL_ENV, show_envvar=True,
                 help="Server base URL; repeat for data-parallel replicas (round-robin). "
                      f"{BASE_URL_ENV} may hold them, separated by spaces."),
    click.option("--receipts-dir", default=None,
                 help="Where the server's patch receipts appear."),
)

#: What every command that sends requests lets the command line override.
load_options = _options(
    click.option("--model", default=None, help="Model name (default: the scenario's, or auto)."),
    click.option("--api-key-env", default=None, metavar="NAME",
                 help="The NAME of the environment variable that holds the server's API key "
                      "(target.api_key_env); the key itself never goes on a command line, "
                      "where every user of the machine can read it."),
    click.option("--concurrency", type=int, default=None, help="Requests in flight."),
    click.option("--priming", type=int, default=None, help="Requests before measuring."),
    click.option("--measurement", type=int, default=None, help="Requests measured and gated."),
    click.option("--max-tokens", type=int, default=None, help="max_tokens of every request."),
    click.option("--rate-limit", type=float, default=None, help="Requests per second (0: none)."),
    click.option("--ready-timeout", type=float, default=None, metavar="SECONDS",
                 help="How long to wait for the server to be ready, at the start "
                      "(target.ready_timeout_s) and after it went away mid-run "
                      "(load.restart_ready_timeout_s)."),
    click.option("--accept-weaker-load", is_flag=True,
                 help="Run even though an override above weakens the scenario's load (less "
                      "concurrency or priming, fewer measured requests or tokens, a slower "
                      "rate); every report then says its claim does not hold as shipped."),
    click.option("--insecure", is_flag=True, help="Do not verify TLS certificates (warns)."),
    click.option("--transport", type=click.Choice(TRANSPORTS), default="auto",
                 show_default=True, help="HTTP stack under httpx."),
    click.option("--quiet", is_flag=True, help="No progress output."),
)

#: Live Prometheus metrics while a run or soak runs (docker/monitoring scrapes them).
metrics_options = _options(
    click.option("--metrics-port", type=click.IntRange(0, 65535), default=0, metavar="PORT",
                 help="Serve Prometheus metrics on /metrics at this port while the command "
                      "runs (0, the default: off)."),
    click.option("--metrics-host", default="0.0.0.0", show_default=True, metavar="ADDR",
                 help="The address the metrics endpoint listens on."),
)

#: Where finished reports are copied (a shared folder or an object store), by node.
ship_option = click.option(
    "--ship-to", "ship_to", default=None, metavar="DEST",
    help="Copy each finished results directory to DEST/<node>/...: a folder every node "
         "sees, or an object store URL (s3://bucket/prefix with s3fs installed). The "
         "local results stay; a failed copy is a warning, not a changed exit code.")


def _shipper(dest: str | None) -> Any:
    """The shipper of --ship-to, made (and checked) before anything is sent."""
    if not dest:
        return None
    from loadgen.shipping import Shipper

    return Shipper(dest)


#: The options above that are scenario overrides (Scenario.with_overrides keys).
OVERRIDE_KEYS = ("base_urls", "receipts_dir", "model", "api_key_env", "concurrency",
                 "priming", "measurement", "max_tokens", "rate_limit", "ready_timeout")


class _Group(click.Group):
    """Turns DsvQualError into one line on stderr and its exit code; never a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except DsvQualError as exc:
            click.echo(f"dsv4-qual: error: {exc}", err=True)
            sys.exit(int(exc.exit_code))

    def main(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        # click exits 2 on usage errors; ours is 3 (bad input), 2 means "run invalid".
        try:
            return super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[call-overload]
        except click.exceptions.Abort:
            click.echo("dsv4-qual: interrupted", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))
        except click.exceptions.NoArgsIsHelpError as exc:
            # A bare `dsv4-qual` asks what there is: the help, on stdout, and success.
            click.echo(exc.ctx.get_help() if exc.ctx else self.get_help(click.Context(self)))
            sys.exit(int(ExitCode.PASSED))
        except click.exceptions.ClickException as exc:
            exc.show()
            sys.exit(int(ExitCode.BAD_INPUT))
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dsv4-qual")
def cli() -> None:
    """Qualify a DeepSeek-V4 vLLM server under concurrent decode."""


@cli.command()
@click.argument("scenario_ref", metavar="SCENARIO")
@click.option("--json", "as_json", is_flag=True,
              help="Print the validated scenario (every key, defaults filled in) as JSON.")
def validate(scenario_ref: str, as_json: bool) -> None:
    """Check a scenario file without sending anything.

    \b
    Examples:
      dsv4-qual validate scenarios/smoke.toml
      dsv4-qual validate release-gate --json | jq .gate
    """
    from loadgen.scenario import load_scenario

    scenario = load_scenario(scenario_ref)
    if as_json:
        doc = {"scenario": scenario.name, "valid": True,
               "required_measured": scenario.gate.required_measured(),
               "resolved": scenario.model_dump(mode="json")}
        click.echo(json.dumps(doc, indent=2))
        return
    load = scenario.load
    reference = scenario.reference
    click.echo(f"{scenario.name}: ok ({scenario.workload.kind}, concurrency {load.concurrency}, "
               f"priming {load.priming}, measurement {load.measurement}, "
               + (f"reference {reference.requests} {reference.when}, "
                  if reference.requests else "")
               + f"gate {scenario.gate.role})")


def _scenario_from(ref: str, options: dict[str, Any]) -> Scenario:
    """The scenario file with the command line's overrides; `options` loses the keys it used."""
    from loadgen.scenario import load_scenario

    overrides = {key: options.pop(key, None) for key in OVERRIDE_KEYS}
    overrides["base_urls"] = list(overrides["base_urls"] or [])
    insecure = options.pop("insecure", False)
    scenario = load_scenario(ref).with_overrides(
        verify_tls=False if insecure else None,
        accept_weaker_load=options.pop("accept_weaker_load", False), **overrides)
    claim = scenario.load_claim()
    if claim.weakened:
        click.echo(f"dsv4-qual: warning: {claim.sentence()}", err=True)
    if insecure:
        click.echo("dsv4-qual: warning: TLS certificate verification is OFF (--insecure)",
                   err=True)
    return scenario


@cli.command()
@click.argument("scenario_ref", metavar="SCENARIO")
@target_options
@load_options
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Results directory (default: results/<scenario>-<id>).")
@click.option("--workers", type=click.IntRange(1, 512), default=1, show_default=True,
              help="Processes sharing each phase (one event loop each).")
@metrics_options
@ship_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the result as one JSON object on stdout instead of the result "
                   "line (progress stays on stderr).")
def run(scenario_ref: str, out: Path | None, workers: int, transport: str, quiet: bool,
        metrics_port: int, metrics_host: str, ship_to: str | None, as_json: bool,
        **options: Any) -> None:
    """One run: wait until ready, priming, measurement, reports; exits with the gate's code.

    \b
    Examples:
      dsv4-qual run scenarios/smoke.toml --base-url http://127.0.0.1:8000
      dsv4-qual run pr-51318 --base-url http://gpu-a:8000 --base-url http://gpu-b:8000 \\
          --receipts-dir /receipts --out results/pr-51318
      dsv4-qual run smoke --base-url http://127.0.0.1:8000 --metrics-port 9464
      DSV4_QUAL_BASE_URL=http://127.0.0.1:8000 dsv4-qual run smoke --json --quiet
    """
    from loadgen.commands.run import live_metrics, run_scenario
    from loadgen.report.outcome import result_document

    scenario = _scenario_from(scenario_ref, options)
    shipper = _shipper(ship_to)
    with live_metrics("run", scenario, metrics_port, metrics_host) as metrics:
        outcome = run_scenario(scenario, out, quiet=quiet, transport=transport,
                               workers=workers, observer=metrics, echo=not as_json)
    if as_json:
        click.echo(json.dumps(result_document(outcome.report)))
    if shipper is not None:
        click.echo(shipper.ship(outcome.out_dir, outcome.out_dir.name), err=True)
    sys.exit(outcome.exit_code)


@cli.command()
@click.argument("results_dir", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Copy RESULTS_DIR here and rebuild the copy (RESULTS_DIR is only read: "
                   "an archive, a read-only share).")
def report(results_dir: Path, out: Path | None) -> None:
    """Rebuild every report of a results directory from its records.jsonl.

    A qualify or demo directory is rebuilt whole: both sides, then the side-by-side
    pages. Exits with the code the run (or the qualification) had.

    \b
    Examples:
      dsv4-qual report results/smoke-20261129T101500Z-01234-1
      dsv4-qual report results/qualify-pr-51318-20261129T101500Z-01234-1
      dsv4-qual report results/demo-20261129T101500Z-01234-1
      dsv4-qual report /archive/nightly/round-0007 --out /tmp/round-0007
    """
    from loadgen.commands.report import rebuild_into

    code, line = rebuild_into(results_dir, out)
    click.echo(line)
    sys.exit(code)


@cli.command()
@click.option("--scenario", "scenario_ref", default="sim-smoke", show_default=True,
              help="A scenario with a [target.sim] section.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Where control/ and candidate/ go (default: results/demo-<id>).")
@click.option("--quiet", is_flag=True,
              help="Print only the side-by-side table and the final `demo: exit N` line: no "
                   "progress, no side's result line, no log line (the reports keep them).")
def demo(scenario_ref: str, out: Path | None, quiet: bool) -> None:
    """The main job on the embedded sim: the bug left in (control) vs the fix (candidate).

    Exits 0 only when the control reproduced the bug and the candidate stayed clean;
    2 when the control did not reproduce (this setup cannot see the bug).

    \b
    Examples:
      dsv4-qual demo --out results/demo           # #52448: packed vs capacity C128A
      dsv4-qual demo --scenario sim-known-answer  # the same, on answers checked exactly
      dsv4-qual demo --scenario sim-sessions      # #52492: the prefix-cache face
    """
    from loadgen.commands.demo import run_demo

    sys.exit(run_demo(scenario_ref, out, quiet))


def _cores(text: str) -> list[int]:
    try:
        return [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of CPUs") from None


@cli.command("bench-client")
@click.option("--concurrency", "concurrencies", type=click.IntRange(1, 100_000), multiple=True,
              default=(64, 256), show_default=True,
              help="Requests in flight (repeat it for a row each).")
@click.option("--mode", "modes", type=click.Choice(["burst", "paced"]), multiple=True,
              default=("burst", "paced"), show_default=True,
              help="burst: whole reply at once; paced: one token every 2 ms.")
@click.option("--transport", "transports", type=click.Choice(["raw", "aiohttp", "httpx"]),
              multiple=True, default=("raw",), show_default=True,
              help="HTTP client of the load generator (repeat it to compare).")
@click.option("--workers", "workers_list", type=click.IntRange(1, 512), multiple=True,
              default=(1,), show_default=True,
              help="Worker processes of the client (repeat it to see the scaling).")
@click.option("--requests", type=click.IntRange(1, 10_000_000), default=2000, show_default=True,
              help="Requests a measurement sends.")
@click.option("--tokens", type=click.IntRange(2, 100_000), default=64, show_default=True,
              help="Tokens the stub streams in each reply.")
@click.option("--repeats", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Measurements of each row (its median is reported).")
@click.option("--stub-cores", default="0", show_default=True, help="CPUs for the stub.")
@click.option("--client-cores", default="1", show_default=True, help="CPUs for the client.")
def bench_client(concurrencies: tuple[int, ...], modes: tuple[str, ...],
                 transports: tuple[str, ...], workers_list: tuple[int, ...], requests: int,
                 tokens: int, repeats: int, stub_cores: str, client_cores: str) -> None:
    """The load generator's own speed against a fast local stub (medians of repeats).

    \b
    Example (stub on CPU 0, client on CPU 1):
      dsv4-qual bench-client --concurrency 64 --concurrency 256 --repeats 3
    On a 16-core host, scaling:
      dsv4-qual bench-client --mode burst --workers 1 --workers 4 \\
          --stub-cores 0,1,2,3 --client-cores 4,5,6,7
    """
    from loadgen.bench.client import bench, render

    clients = _cores(client_cores)
    results = bench(list(concurrencies), list(modes), list(transports), list(workers_list),
                    requests, tokens, repeats, _cores(stub_cores), clients)
    click.echo(render(results, tokens, clients))


@cli.command()
@click.argument("scenario_ref", metavar="SCENARIO")
@click.option("--control", "control_urls", multiple=True, metavar="URL",
              help="The positive control's base URL (a server with the bug left in); "
                   "repeat for data-parallel replicas.")
@click.option("--candidate", "candidate_urls", multiple=True, metavar="URL",
              help="The candidate's base URL; repeat for data-parallel replicas.")
@click.option("--control-receipts-dir", default=None, help="The control's patch receipts.")
@click.option("--candidate-receipts-dir", default=None, help="The candidate's patch receipts.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Qualification directory (default: results/qualify-<scenario>-<id>); "
                   "the runs go to its control/ and candidate/.")
@load_options
@metrics_options
@ship_option
def qualify(scenario_ref: str, control_urls: tuple[str, ...], candidate_urls: tuple[str, ...],
            control_receipts_dir: str | None, candidate_receipts_dir: str | None,
            out: Path | None, transport: str, quiet: bool, metrics_port: int,
            metrics_host: str, ship_to: str | None, **options: Any) -> None:
    """The positive control first, then the candidate; one verdict.

    Exit 0 only when the control reproduced the bug, the candidate stayed within its
    gate, AND the candidate fails less often than the control, proven by a one-sided
    difference test at 95% (Fisher's exact test on the two sides' gated failures); 1
    when the candidate failed its gate; 2 when the control did not reproduce (the
    harness cannot see the bug here; the candidate is not run), a run was invalid, or
    the difference is NOT PROVEN (too few measured requests for the control's rate: the
    report says how many per side would settle it).

    Targets: --control and --candidate, else the scenario's [qualify.control] and
    [qualify.candidate] (base_urls, or a sim of their own: [qualify.control.sim],
    [qualify.candidate.sim]); one URL alone needs the other side in the scenario.
    With no URL, a side the scenario gives no target runs the scenario's
    [target.sim]: the bug its `reproduces` names left in for the control (packed, or
    the captured indexer shortcut), the fix for the candidate, exactly what `demo` runs.
    The two sides must be two servers: one URL given for both is bad input.

    \b
    Examples:
      dsv4-qual qualify pr-51318 --control http://gpu-a:8000 --candidate http://gpu-b:8000
      dsv4-qual qualify pr-51318 --control http://a:8000 --candidate http://b:8000 \\
          --candidate-receipts-dir /receipts --out results/qualify-0.28.0
      dsv4-qual qualify sim-smoke        # the embedded sim on both sides, as the demo
      dsv4-qual qualify pr-51318 --control http://a:8000 --candidate http://b:8000 \\
          --metrics-port 9464              # each side's run on /metrics in turn
    """
    from loadgen.commands.qualify import qualify as run_qualify
    from loadgen.commands.qualify import with_sides
    from loadgen.commands.run import live_metrics

    scenario = _scenario_from(scenario_ref, options)
    cfg = with_sides(scenario, control_urls=list(control_urls), candidate_urls=list(candidate_urls),
                     control_receipts=control_receipts_dir,
                     candidate_receipts=candidate_receipts_dir)
    shipper = _shipper(ship_to)
    with live_metrics("qualify", scenario, metrics_port, metrics_host) as metrics:
        outcome = run_qualify(scenario, cfg, out, quiet=quiet, transport=transport,
                              observer=metrics)
    if shipper is not None:
        click.echo(shipper.ship(outcome.out_dir, outcome.out_dir.name), err=True)
    click.echo(f"qualify {scenario.name}: {outcome.document.headline}; reports in "
               f"{outcome.out_dir}")
    for reason in outcome.document.reasons:
        click.echo(f"  - {reason}")
    sys.exit(outcome.exit_code)


@cli.command()
@click.argument("scenario_ref", metavar="SCENARIO")
@click.option("--duration", default=None, metavar="D",
              help="Soak length from its first start, e.g. 8h, 90m, 1h30m.")
@click.option("--rounds", type=int, default=None, metavar="N",
              help="Stop after N complete rounds (with --duration: whichever comes first).")
@click.option("--history", "history_db", default=None, metavar="DB",
              help="History: a SQLite file (default: soak-history.sqlite next to --out) or "
                   "a postgresql:// URL the fleet shares (rounds are spooled in --out while "
                   "it is away).")
@target_options
@click.option("--stop-on-breach/--no-stop-on-breach", default=None,
              help="End the soak after the first round that fails its gate.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Soak directory (default: results/soak-<scenario>); running the same "
                   "command again resumes the soak there.")
@click.option("--new", is_flag=True,
              help="Start a new soak even if an unfinished one is in --out (it is abandoned).")
@load_options
@metrics_options
@ship_option
def soak(scenario_ref: str, duration: str | None, rounds: int | None, history_db: str | None,
         stop_on_breach: bool | None, out: Path | None, new: bool, transport: str,
         quiet: bool, metrics_port: int, metrics_host: str, ship_to: str | None,
         **options: Any) -> None:
    """Nightly rounds against one server, each appended to the history (SQLite or PostgreSQL).

    Primes once per server start (seen in /metrics' process_start_time_seconds, else
    a readiness loss), then measures round after round. Killed, it resumes: run the
    same command again. Exit: 130 interrupted; 1 a round failed its gate; 2 a round
    was invalid (or none completed); 0 all rounds passed.

    \b
    Examples:
      dsv4-qual soak nightly-soak --duration 8h --base-url http://gpu-a:8000 \\
          --receipts-dir /receipts --history /data/dsv4-history.sqlite --out results/nightly
      dsv4-qual soak smoke --rounds 3 --base-url http://127.0.0.1:8000 --stop-on-breach
      dsv4-qual soak nightly-soak --duration 8h --base-url http://gpu-a:8000 \\
          --receipts-dir /receipts --metrics-port 9464 \\
          --history postgresql://dsv4@history-db/dsv4   # the fleet's one database
    """
    from loadgen.commands.run import live_metrics
    from loadgen.commands.soak import history_default, make_plan, show_rounds
    from loadgen.commands.soak import soak as run_soak

    scenario = _scenario_from(scenario_ref, options)
    plan = make_plan(scenario, duration, rounds, stop_on_breach)
    shipper = _shipper(ship_to)
    with live_metrics("soak", scenario, metrics_port, metrics_host) as metrics:
        outcome = run_soak(scenario, plan, out, history_db or history_default(out, scenario),
                           quiet=quiet, transport=transport, new=new, observer=metrics,
                           shipper=shipper)
    show_rounds(outcome)
    sys.exit(outcome.exit_code)


#: `history` filters: option -> the round fact it matches (history.pooling.GROUP_KEYS).
_HISTORY_FILTERS = (
    ("--host", "host", "Only rounds run from this host."),
    ("--gpu", "gpu", "Only rounds on this GPU (its name, e.g. 'NVIDIA H200')."),
    ("--driver", "driver", "Only rounds on this GPU driver release."),
    ("--vllm", "vllm", "Only rounds of this vLLM version."),
    ("--image", "image", "Only rounds of this server image (name, or digest)."),
    ("--model", "model", "Only rounds of this model."),
    ("--revision", "revision", "Only rounds of this model revision."),
    ("--layout", "layout", "Only rounds with this C128A layout."),
    ("--scenario-hash", "scenario-hash",
     "Only rounds of this resolved scenario (its hash, or its first 6+ characters)."),
)


def _history_filters(func: Any) -> Any:
    for flag, key, text in reversed(_HISTORY_FILTERS):
        func = click.option(flag, f"filter_{key.replace('-', '_')}", default=None,
                            metavar="VALUE", help=text + " 'unknown': not recorded.")(func)
    return func


@cli.command()
@click.argument("db")
@click.option("--soak", "soak_id", default=None, help="Only this soak's rounds.")
@click.option("--scenario", "scenario_name", default=None, help="Only this scenario's rounds.")
@_history_filters
@click.option("--last", type=click.IntRange(min=1), default=None,
              help="Only the last N rounds (after the filters).")
@click.option("--group-by", "group_by", multiple=True, metavar="KEY",
              type=click.Choice(["host", "gpu", "gpu-count", "driver", "vllm", "image",
                                 "model", "revision", "layout", "scenario", "scenario-hash",
                                 "soak"]),
              help="Pool valid rounds per KEY (repeat it to combine keys; default vllm); "
                   "change points are looked for in each group's rounds.")
@click.option("--plot", type=click.Path(path_type=Path), default=None,
              help="Trend plot PNG (default: <DB without suffix>-trend.png).")
@click.option("--no-plot", "no_plot", is_flag=True,
              help="Write no trend plot (e.g. a history on a read-only share).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the rows as JSON instead (no plot unless --plot names one).")
def history(db: str, soak_id: str | None, scenario_name: str | None, last: int | None,
            group_by: tuple[str, ...], plot: Path | None, no_plot: bool, as_json: bool,
            **filters: str | None) -> None:
    """The soak history's trend: rounds, pooled figures, change points, and a plot.

    DB: a SQLite history or the fleet's postgresql:// URL. Invalid and partial rounds
    are listed as such and never pooled. Change points in the failure rate are found
    across each group's rounds and across vLLM versions (ruptures, binomial cost).

    \b
    Examples:
      dsv4-qual history results/soak-history.sqlite --scenario nightly-soak --last 30
      dsv4-qual history postgresql://dsv4@history-db/dsv4 --gpu 'NVIDIA B200' \\
          --group-by host --group-by vllm
    """
    from loadgen.commands.history import show_history

    chosen = {key.removeprefix("filter_").replace("_", "-"): value
              for key, value in filters.items() if value is not None}
    if plot is not None and no_plot:
        raise BadInputError("--plot and --no-plot: choose one")
    shown = show_history(db, soak_id=soak_id, scenario=scenario_name, last=last, plot=plot,
                         as_json=as_json, no_plot=no_plot, filters=chosen,
                         group_by=list(group_by) or None)
    if not shown.rounds:
        click.echo("no rounds recorded (yet)", err=True)
    elif shown.plot is not None:
        click.echo(f"trend plot: {shown.plot}", err=True)
    elif shown.plot_problem is not None:
        # What was printed stands; a plot the user named is bad input, the default
        # one beside a read-only history only a warning.
        hint = "; --plot PATH to write it elsewhere, or --no-plot"
        if plot is not None:
            raise BadInputError(shown.plot_problem + hint)
        click.echo(f"dsv4-qual: warning: {shown.plot_problem}{hint}", err=True)


@cli.command()
@click.argument("db")
@click.option("--scenario", "scenario_name", default=None,
              help="Only this scenario's rounds (e.g. nightly-soak).")
@click.option("--since", default="24h", show_default=True, metavar="WHEN",
              help="The window: rounds started this long ago (12h) or since this moment "
                   "(2026-12-04T00:00:00Z).")
@click.option("--nodes", "node_names", multiple=True, metavar="NODE[,NODE...]",
              help="The nodes that must answer (repeat it or comma-separate). Default: "
                   "every node that reported over --lookback before the window.")
@click.option("--nodes-file", type=click.Path(path_type=Path), default=None,
              help="The nodes that must answer, one a line (e.g. scontrol show hostnames).")
@click.option("--lookback", default="7d", show_default=True, metavar="DURATION",
              help="Without --nodes: how far before the window a node's report makes it "
                   "expected in the window.")
@_history_filters
@click.option("--json-out", type=click.Path(path_type=Path), default=None,
              help="Write the verdict as JSON here.")
@click.option("--markdown", "markdown_out", type=click.Path(path_type=Path), default=None,
              help="Write the verdict as Markdown here.")
@click.option("--junit", "junit_out", type=click.Path(path_type=Path), default=None,
              help="Write one JUnit testcase per node here.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON instead.")
def fleet(db: str, scenario_name: str | None, since: str, node_names: tuple[str, ...],
          nodes_file: Path | None, lookback: str, json_out: Path | None,
          markdown_out: Path | None, junit_out: Path | None, as_json: bool,
          **filters: str | None) -> None:
    """Did this release pass on every node? One verdict from the fleet's history.

    DB: the fleet's postgresql:// URL or a SQLite history (soak rounds), or a folder of
    qualifications (every qualify.json below it, one a node and run). Each node is
    judged on its last finished round in the window: it passes only when that round was
    valid and within its gate (a qualification: QUALIFIED). A failed gate, an invalid or partial
    round, or no round at all is that node's failure (exit 1); a node still in its
    first round, or no node known at all, leaves the answer open (exit 2).

    \b
    Examples:
      dsv4-qual fleet postgresql://dsv4@history-db/dsv4 --scenario nightly-soak \\
          --since 12h --nodes-file nodes.txt --junit fleet.xml --markdown fleet.md
      dsv4-qual fleet results/soak-history.sqlite --since 2026-12-04T00:00:00Z \\
          --vllm 0.27.1 --nodes gpu-a,gpu-b
      dsv4-qual fleet /shared/qualify-0.28.0 --scenario pr-51318 --nodes-file nodes.txt
    """
    from loadgen.commands.fleet import fleet_verdict, read_nodes, show, write_documents

    chosen = {key.removeprefix("filter_").replace("_", "-"): value
              for key, value in filters.items() if value is not None}
    verdict = fleet_verdict(db, scenario=scenario_name, since=since, lookback=lookback,
                            nodes=read_nodes(node_names, nodes_file), filters=chosen)
    code = show(verdict, as_json)
    write_documents(verdict, json_path=json_out, markdown_path=markdown_out,
                    junit_path=junit_out)
    click.echo(f"fleet: {verdict.statement()} (exit {int(code)})", err=True)
    sys.exit(int(code))


def _load_command_plugins() -> None:
    """Commands contributed by other packages of the distribution (e.g. `sim`)."""
    for ep in entry_points(group=COMMAND_PLUGINS_GROUP):
        if ep.name in cli.commands:
            continue
        try:
            command = ep.load()
        except ImportError as exc:  # e.g. the server extra (torch) is not installed
            command = _unavailable(ep.name, str(exc))
        cli.add_command(command, ep.name)


def _unavailable(name: str, reason: str) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True},
                   add_help_option=False)
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def _cmd(args: tuple[str, ...]) -> None:
        raise DsvQualError(
            f"'{name}' needs {SERVER_EXTRA}: {reason}",
            ExitCode.BAD_INPUT,
        )

    _cmd.help = f"(unavailable: install the server extra) {reason}"
    return _cmd


#: Collections of the cyclic collector's middle generation between two full ones
#: (Python's default: 10). A command builds most of what it ever holds as it starts and
#: keeps it to its end (modules, classes, the judge's tables, matplotlib): at 10, three
#: full passes over that while it is built, each finding next to nothing to free, cost a
#: 64-request run 0.1-0.2 CPU-s. Garbage in cycles still goes with the young generations,
#: where nearly all of it dies; a full pass now waits ten times longer.
FULL_COLLECTION_EVERY = 100


def main() -> None:
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
    _load_command_plugins()
    try:
        cli.main(prog_name="dsv4-qual")
    finally:
        # The command is over and everything it holds goes with the process: frozen, the
        # objects are not walked once more for cycles as the interpreter shuts down
        # (another 0.1 CPU-s at a run's end). Objects freed by their last reference are
        # freed at shutdown as before.
        gc.freeze()
