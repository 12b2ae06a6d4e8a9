"""Embedded targets: servers the run starts in-process and stops after (the sim).

The loadgen never imports the server package; a target is found through the entry
point group below, which the distribution's server part registers. Without the
server extra installed, asking for one is a clear bad-input error. Every command that
measures a server (run, soak, and through run: qualify and demo) goes through
`serving`: a new kind of embedded server is one registered factory and one section of
the scenario's [target].
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from loadgen.exit_codes import BadInputError

if TYPE_CHECKING:  # read, never built here: the CLI imports SERVER_EXTRA before any scenario
    from loadgen.scenario import Scenario

TARGETS_GROUP = "dsv4_qual.targets"
#: How to get the server extra: not from an index (the project is installed from its
#: checkout), and torch's CPU wheel first on a machine without a GPU (else pip pulls a
#: CUDA build of several GB).
SERVER_EXTRA = ("the server extra (from the checkout: pip install -e '.[server]'; on a CPU "
                "machine install torch's CPU wheel first, as the README's Install says)")


class EmbeddedTarget(Protocol):
    """A server the run started: stop it, read what it left, then close it."""

    base_url: str
    receipts_dir: str | None

    def stop(self) -> None:
        """Stop serving; its receipts stay readable, final counts written."""
        ...

    def close(self) -> None:
        """Stop, and remove what it made for itself (a receipts folder in the temp
        dir): call it once the run has kept what it needs (server.json)."""
        ...


def start_embedded(name: str, options: dict[str, Any]) -> EmbeddedTarget:
    """Start the embedded target `name` with its scenario options (and `quiet`: the run
    prints nothing but its results, so the target logs nothing either)."""
    for ep in entry_points(group=TARGETS_GROUP):
        if ep.name == name:
            try:
                factory = ep.load()
            except ImportError as exc:
                raise BadInputError(
                    f"target.{name} needs {SERVER_EXTRA}: {exc}") from None
            return factory(**options)
    raise BadInputError(f"target.{name}: no embedded target {name!r} is installed")


@contextlib.contextmanager
def serving(scenario: Scenario, *, quiet: bool = False
            ) -> Iterator[tuple[Scenario, EmbeddedTarget | None]]:
    """The scenario as it is measured, and the embedded server started for it (None when
    it names URLs): its URL becomes the target, and its receipts folder the one the run
    reads unless the scenario names one. The server is closed when the block ends; the
    block stops it first when it must read its final receipts (`EmbeddedTarget.stop`)."""
    spec = scenario.target.embedded()
    if spec is None:
        yield scenario, None
        return
    name, options = spec
    target = start_embedded(name, {**options, "receipts_dir": scenario.target.receipts_dir,
                                   "quiet": quiet})
    try:
        yield scenario.with_overrides(
            base_urls=[target.base_url],
            receipts_dir=scenario.target.receipts_dir or target.receipts_dir), target
    finally:
        target.close()
