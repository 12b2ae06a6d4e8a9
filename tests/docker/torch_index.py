"""torch's CPU build as a package index on 127.0.0.1, for the sim image's build.

docker/Dockerfile.sim installs torch from PyTorch's CPU index (TORCH_INDEX_URL), which
CI cannot reach. The tier gives the build what a mirror would: a PEP 503 "simple"
index with a torch/ page, here a folder served by the standard library's HTTP server,
holding the wheel the host's pip finds for the Dockerfile's TORCH_VERSION (the host's
pip configuration is what finds the CPU build PyPI does not have; the same one the
vllm stand-in's wheelhouse is downloaded with). The build runs on the host network, so
127.0.0.1 is the host. Stdlib only.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE_SIM = REPO / "docker" / "Dockerfile.sim"


def torch_version() -> str:
    """The torch the sim image pins (its Dockerfile's TORCH_VERSION)."""
    found = re.search(r"^ARG TORCH_VERSION=(\S+)$", DOCKERFILE_SIM.read_text(), re.MULTILINE)
    if not found:
        raise RuntimeError(f"{DOCKERFILE_SIM.name} names no TORCH_VERSION")
    return found[1]


def index_folder(cache: Path) -> Path:
    """`<cache>/torch-index-<version>/torch/<the wheel>`; downloaded once, then reused."""
    version = torch_version()
    root = cache / f"torch-index-{version}"
    if (root / ".complete").is_file():
        return root
    shutil.rmtree(root, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".torch-index-", dir=cache))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "--no-deps", "-d", str(partial / "torch"), f"torch=={version}"],
        capture_output=True, text=True, timeout=1800)
    wheels = list((partial / "torch").glob("torch-*.whl"))
    if done.returncode != 0 or not wheels:
        shutil.rmtree(partial, ignore_errors=True)
        raise RuntimeError(f"pip download torch=={version} exited {done.returncode}:\n"
                           f"{done.stderr[-4000:]}")
    if not all("+cpu" in w.name for w in wheels):
        shutil.rmtree(partial, ignore_errors=True)
        raise RuntimeError(f"the host's pip found no CPU build of torch {version}: "
                           f"{[w.name for w in wheels]}")
    (partial / ".complete").write_text(version + "\n")
    partial.rename(root)
    return root


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """The folder over HTTP on 127.0.0.1 (an ephemeral port) while the block runs."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def forget_other_versions(cache: Path) -> None:
    """The cache holds one torch index: the Dockerfile's version."""
    wanted = f"torch-index-{torch_version()}"
    for folder in cache.glob("torch-index-*"):
        if folder.name != wanted:
            shutil.rmtree(folder, ignore_errors=True)
