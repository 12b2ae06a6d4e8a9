"""Running `dsv4-qual` from a test: in-process (fast) or as a real process (slow tier).

In-process goes through click's runner with the real command group, so exit codes,
stdout and stderr are what a user sees; an exception that escapes the command fails
the test instead of hiding in a return code. A real process is for what only a
process can show: signals, SIGKILL, worker processes, the console entry point.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
#: The terminal width a CLI sees in a test, whatever the runner's own (a parallel
#: runner's workers say 80): tables read the same in every run of the suite.
WIDTH = {"COLUMNS": "200"}


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
            cwd: Path | None = None) -> CliResult:
    """`dsv4-qual ARGS` in this process (timeout: pytest-timeout's, not this one)."""
    from loadgen.cli import _load_command_plugins, cli
    from loadgen.commands import interrupts

    _load_command_plugins()
    # A finished run holds SIGINT/SIGTERM until the process exits: put them back.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, list(args), env={**WIDTH, **(env or {})},
                                    prog_name="dsv4-qual",
                                    catch_exceptions=True)
    finally:
        os.chdir(previous)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        interrupts.HELD.signal = None
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        raise exc
    return CliResult(result.exit_code, result.stdout, result.stderr)


def run_cli_process(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
                    cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m loadgen ARGS` in a subprocess: real exit codes, real signals, real stdout."""
    return subprocess.run(cli_command(*args), capture_output=True, text=True, timeout=timeout,
                          env=cli_env(env), cwd=cwd or Path.cwd())


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "loadgen", *args]


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI subprocess: this checkout's packages first, unbuffered."""
    env = {**os.environ, **WIDTH, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
