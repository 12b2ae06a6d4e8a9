"""Embedded targets: servers the run starts in-process and stops after (the sim).

The loadgen never imports the server package; a target is found through the entry
point group below, which the distribution's server part registers. Without the
server extra installed, asking for one is a clear bad-input error.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any, Protocol

from loadgen.exit_codes import BadInputError

TARGETS_GROUP = "dsv4_qual.targets"


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
                    f"target.{name} needs the server extra "
                    f"(pip install 'dsv4-qual[server]'): {exc}") from None
            return factory(**options)
    raise BadInputError(f"target.{name}: no embedded target {name!r} is installed")
