"""Process exit codes: the contract CI systems and `docker compose --exit-code-from` read."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a `dsv4-qual` process tells its caller.

    The values are public: README documents them and pipelines branch on them.
    """

    PASSED = 0  # the gate passed
    GATE_FAILED = 1  # the run was valid and the gate failed
    RUN_INVALID = 2  # server not ready, infrastructure errors over the limit, receipt missing
    BAD_INPUT = 3  # scenario file or arguments are wrong; nothing was sent
    INTERRUPTED = 130  # SIGINT/SIGTERM: partial results were kept and reported


#: How reports and the console name each outcome.
EXIT_WORDS: dict[int, str] = {
    ExitCode.PASSED: "PASSED",
    ExitCode.GATE_FAILED: "GATE FAILED",
    ExitCode.RUN_INVALID: "RUN INVALID",
    ExitCode.INTERRUPTED: "INTERRUPTED",
}


class DsvQualError(Exception):
    """An error that ends the process with a one-line message and a documented code."""

    exit_code: ExitCode = ExitCode.RUN_INVALID

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class BadInputError(DsvQualError):
    """The user's input (scenario, flags, paths) cannot be used."""

    exit_code = ExitCode.BAD_INPUT


class RunInvalidError(DsvQualError):
    """The run could not produce a trustworthy verdict (server never ready, ...)."""

    exit_code = ExitCode.RUN_INVALID
