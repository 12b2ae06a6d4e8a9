"""A throwaway PostgreSQL cluster for the history's tests: initdb, postgres, stop by pid.

The binaries are looked for on PATH, then where Debian's postgresql package puts them
(/usr/lib/postgresql/<major>/bin). initdb refuses to run as root, so as root the
cluster runs as `nobody`, in a temp dir it owns, on its own port and socket dir.
Without the binaries the tests skip, except where DSV4_QUAL_REQUIRE_POSTGRES=1 or CI
is set (`.ci/run` installs them), where they fail: a skipped tier would pass every
change to the fleet history.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

REQUIRE_ENV = "DSV4_QUAL_REQUIRE_POSTGRES"
#: The machine's temp dir as it was at import: a test's own temp dir (tests/conftest.py)
#: sits under a folder only its owner may enter, where `nobody` could not run a cluster.
#: The cluster's folder is removed with it (`Cluster.remove`).
_SHARED_TEMP = tempfile.gettempdir()


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    debian = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
                    key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    return str(debian[-1]) if debian else None


def binaries() -> tuple[str, str] | None:
    initdb, postgres = _binary("initdb"), _binary("postgres")
    return (initdb, postgres) if initdb and postgres else None


def require_binaries() -> tuple[str, str]:
    found = binaries()
    if found:
        return found
    message = "PostgreSQL's initdb and postgres not found (bash .ci/postgres-tools.sh)"
    if os.environ.get(REQUIRE_ENV) == "1" or os.environ.get("CI"):
        pytest.fail(message + ": CI must run the PostgreSQL history tests", pytrace=False)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One cluster: `start()` (initdb the first time), `stop()` by the server's pid."""

    def __init__(self) -> None:
        self.initdb, self.postgres = require_binaries()
        self.root = Path(tempfile.mkdtemp(prefix="dsv4-pg-", dir=_SHARED_TEMP))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user: dict[str, Any] = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self.user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.root / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        subprocess.run(args, check=True, capture_output=True, cwd=self.root, **self.user)

    def start(self, timeout: float = 60.0) -> Cluster:
        if not (self.data / "PG_VERSION").exists():
            self._run(self.initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust",
                      "-E", "UTF8", "--no-locale", "--no-sync")
        log = open(self.log, "ab")  # noqa: SIM115 - the server's, closed with it
        self.proc = subprocess.Popen(
            [self.postgres, "-D", str(self.data), "-p", str(self.port), "-k", str(self.root),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=50"],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.root, **self.user)
        log.close()
        deadline = time.monotonic() + timeout
        import psycopg

        while True:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostgreSQL did not start:\n"
                                       + self.log.read_text()[-2000:]) from None
                time.sleep(0.1)

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the server's pid: sessions are cut, as in an outage)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def new_database(self, name: str) -> str:
        """A fresh database of this cluster, its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
