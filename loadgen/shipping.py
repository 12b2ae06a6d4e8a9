"""`--ship-to DEST`: each finished run's reports copied beside the fleet's history.

A fleet's release manager reads one place, not a folder on every node: DEST is a
directory every node sees (NFS, Lustre) or an object store URL (`s3://bucket/prefix`,
`gs://...`; fsspec, with the store's package installed: s3fs, gcsfs). Each results
directory lands at DEST/<node>/<its path under the command's output>, so nodes never
overwrite each other and a soak's rounds stay under their soak.

The local results are the record: shipping copies them once they are whole (after the
reports are written), and a copy that fails says so on stderr and leaves the run's exit
code as it was. A destination that cannot work at all (no package for its protocol, a
directory that cannot be made) is bad input before anything is sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec

from loadgen.exit_codes import BadInputError
from loadgen.run_facts import node_name


class Shipper:
    def __init__(self, dest: str, node: str | None = None) -> None:
        self.dest = dest
        self.node = node or node_name() or "unknown-node"
        try:
            self.fs: Any
            self.fs, root = fsspec.core.url_to_fs(dest)
        except (ImportError, ValueError) as exc:
            raise BadInputError(f"--ship-to {dest}: {exc}") from None
        self.root = f"{str(root).rstrip('/')}/{self.node}"
        try:
            self.fs.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise BadInputError(f"--ship-to {dest}: cannot write there "
                                f"({getattr(exc, 'strerror', None) or exc})") from None

    def target(self, relative: str) -> str:
        return f"{self.root}/{relative.strip('/')}"

    def ship(self, directory: Path, relative: str) -> str:
        """Copy `directory` to DEST/<node>/<relative>; the line to print either way."""
        where = self.target(relative)
        shown = f"{self.dest.rstrip('/')}/{self.node}/{relative.strip('/')}"
        try:
            self.fs.makedirs(where, exist_ok=True)
            self.fs.put(f"{directory}/", f"{where}/", recursive=True)
        except Exception as exc:  # any store's error: the local results stand
            return (f"dsv4-qual: warning: reports not shipped to {shown}: "
                    f"{type(exc).__name__}: {exc}; they are in {directory}")
        return f"reports shipped to {shown}"
