"""The `dsv4-qual` command line: one console script, one sub-command per job."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

import click

from . import __version__
from .exit_codes import DsvQualError, ExitCode
from .scenario import load_scenario

COMMAND_PLUGINS_GROUP = "dsv4_qual.commands"


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
            return super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[arg-type]
        except click.exceptions.Abort:
            click.echo("dsv4-qual: interrupted", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))
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
@click.argument("scenario")
def validate(scenario: str) -> None:
    """Check a scenario file without sending anything.

    \b
    Example:
      dsv4-qual validate scenarios/smoke.toml
    """
    sc = load_scenario(scenario)
    click.echo(
        f"{sc.name}: ok ({sc.workload.kind}, concurrency {sc.load.concurrency}, "
        f"priming {sc.load.priming}, measurement {sc.load.measurement}, gate {sc.gate.role})"
    )


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
            f"'{name}' needs the server extra (pip install 'dsv4-qual[server]'): {reason}",
            ExitCode.BAD_INPUT,
        )

    _cmd.help = f"(unavailable: install the server extra) {reason}"
    return _cmd


def main() -> None:
    _load_command_plugins()
    cli.main(prog_name="dsv4-qual")
