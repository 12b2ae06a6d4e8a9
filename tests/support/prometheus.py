"""A real Prometheus server and its `promtool` for tests (Debian's `prometheus` package;
`.ci/monitoring-tools.sh` installs it).

Without them the tests skip and say how to get them, except under CI (`CI` set) or with
`DSV4_QUAL_REQUIRE_PROMETHEUS=1` (`.ci/run`), where a missing tool is a failure: a
skipped check would pass silently. DSV4_QUAL_PROMETHEUS / DSV4_QUAL_PROMTOOL name the
binaries when they are not on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.scrape import free_port

REQUIRE_ENV = "DSV4_QUAL_REQUIRE_PROMETHEUS"
INSTALL_HINT = "bash .ci/monitoring-tools.sh, or Debian's apt-get install prometheus"


def required() -> bool:
    return bool(os.environ.get("CI") or os.environ.get(REQUIRE_ENV))


def tool(name: str) -> str:
    """The path of `prometheus` or `promtool`; a skip (a failure where required) without."""
    path = os.environ.get(f"DSV4_QUAL_{name.upper()}") or shutil.which(name)
    if path and Path(path).is_file():
        return path
    message = f"{name} is not installed ({INSTALL_HINT})"
    if required():
        pytest.fail(message)
    pytest.skip(message)


class Prometheus:
    """One Prometheus on 127.0.0.1 with its own config and data dir, scraping `targets`
    every `interval` and evaluating `rules` as often; stopped by its pid."""

    def __init__(self, workdir: Path, targets: list[str], rules: list[Path],
                 interval: str = "1s") -> None:
        self.binary = tool("prometheus")
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "prometheus.yml"
        self.config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(r) for r in rules],
            "scrape_configs": [{"job_name": "dsv4-qual",
                                "static_configs": [{"targets": targets}]}],
        }))
        self.log = workdir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> Prometheus:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [self.binary, f"--config.file={self.config}",
                 f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--storage.tsdb.retention.time=1d"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited {self.proc.returncode}:\n"
                                     f"{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"prometheus not ready after {timeout_s} s:\n"
                             f"{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # this pid only: the one this object started
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def api(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant vector: [{"metric": {labels}, "value": [t, "v"]}, ...]."""
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = at
        return self.api("query", **params)["result"]

    def query_range(self, expr: str, start: float, end: float,
                    step: float = 1.0) -> list[dict[str, Any]]:
        return self.api("query_range", query=expr, start=start, end=end, step=step)["result"]

    def alerts(self) -> list[dict[str, Any]]:
        return self.api("alerts")["alerts"]

    def firing(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.alerts()
                if a["labels"].get("alertname") == name and a["state"] == "firing"]
