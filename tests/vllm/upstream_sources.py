"""Upstream vLLM's `sparse_mla.py` per release, fetched from the release wheels and cached.

Why wheels: the released file is what users run; a git checkout of vLLM is too large to
fetch here. Only one file is kept per release (the ~320 MB wheel is deleted at once),
and its git blob id is checked against the one recorded when the variants were studied
(shared research notes), so a cache or a wheel that is not that release is refused.
Stdlib only; pip is the vllm venv's (plain pip, for the machine's index settings).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

SPARSE_MLA = "vllm/models/deepseek_v4/sparse_mla.py"

# Git blob ids of vllm/models/deepseek_v4/sparse_mla.py in each release wheel.
BLOB_IDS = {
    "0.27.1": "4ac27bd59a8d344a5f57a157c4934e9471394993",  # packed (#50004)
    "0.28.0": "0475e4c96df73a36b197d9f891d82b291990e7a5",  # capacity (#51318)
    "0.32.0": "cdab7d23ae071bf87fd085c55ade9ead2c7855b0",  # capacity stride, active prefix (#52823)
}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class SourceMismatch(RuntimeError):
    pass


def check(version: str, data: bytes, where: str) -> None:
    blob = git_blob_id(data)
    if blob != BLOB_IDS[version]:
        raise SourceMismatch(f"{where}: blob {blob}, expected vllm {version}'s "
                             f"{BLOB_IDS[version]}")


def sparse_mla_source(version: str, cache_root: Path, python: Path) -> Path:
    """The release's sparse_mla.py, from the cache or from `pip download --no-deps`."""
    cached = cache_root / "upstream" / f"vllm-{version}" / "sparse_mla.py"
    if cached.is_file():
        check(version, cached.read_bytes(), str(cached))
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
        subprocess.run(
            [str(python), "-m", "pip", "download", "-q", "--no-deps",
             "--only-binary", ":all:", "-d", tmp, f"vllm=={version}"],
            check=True, capture_output=True, timeout=900,
        )
        (wheel,) = Path(tmp).glob("vllm-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            data = zf.read(SPARSE_MLA)
        check(version, data, wheel.name)
        part = cached.with_suffix(".part")
        part.write_bytes(data)
        part.replace(cached)
        shutil.rmtree(tmp, ignore_errors=True)
    return cached
