"""Upstream vLLM's `sparse_mla.py` per release, fetched from the release wheels and cached.

Why wheels: the released file is what users run; a git checkout of vLLM is too large to
fetch here. Only the pinned files are kept per release (the ~320 MB wheel is deleted at
once), and each file's git blob id is checked against the one recorded when the variants
were studied (shared research notes), so a cache or a wheel that is not that release is
refused. Stdlib only; pip is the given python's (plain pip, for the machine's index
settings).

The cache (`<cache root>/upstream/vllm-<release>/<file name>`) can be filled on a machine
with an index and copied to one without: a complete, blob-checked cache is used as is.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

SPARSE_MLA = "vllm/models/deepseek_v4/sparse_mla.py"
#: 0.30+ launches the kernel through vLLM's JIT-warmup objects; the benchmark that runs
#: 0.32.0's builder without vLLM needs these two files of the same wheel.
JIT_WARMUP = "vllm/model_executor/warmup/jit_warmup.py"
JIT_WARMUP_TRITON = "vllm/model_executor/warmup/jit_warmup_triton_helper.py"

# Git blob ids of vllm/models/deepseek_v4/sparse_mla.py in each release wheel.
BLOB_IDS = {
    "0.27.1": "4ac27bd59a8d344a5f57a157c4934e9471394993",  # packed (#50004)
    "0.28.0": "0475e4c96df73a36b197d9f891d82b291990e7a5",  # capacity (#51318)
    "0.32.0": "cdab7d23ae071bf87fd085c55ade9ead2c7855b0",  # capacity stride, active prefix (#52823)
    # The same file: 0.34.0 (Model Runner V1 gone) changed nothing the builder does.
    "0.34.0": "cdab7d23ae071bf87fd085c55ade9ead2c7855b0",
}

#: Every pinned file per release: path in the wheel -> git blob id.
PINNED_FILES: dict[str, dict[str, str]] = {
    "0.27.1": {SPARSE_MLA: BLOB_IDS["0.27.1"]},
    "0.28.0": {SPARSE_MLA: BLOB_IDS["0.28.0"]},
    "0.32.0": {
        SPARSE_MLA: BLOB_IDS["0.32.0"],
        JIT_WARMUP: "84f713aa6489577a905667728023da405737f250",
        JIT_WARMUP_TRITON: "70ec8cd70fc58c3992d7288282c687a433c10065",
    },
    "0.34.0": {SPARSE_MLA: BLOB_IDS["0.34.0"]},
}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class SourceMismatch(RuntimeError):
    pass


def check(version: str, data: bytes, where: str, path: str = SPARSE_MLA) -> None:
    blob = git_blob_id(data)
    expected = PINNED_FILES[version][path]
    if blob != expected:
        raise SourceMismatch(f"{where}: blob {blob}, expected vllm {version}'s {path} {expected}")


def cached_path(version: str, path: str, cache_root: Path) -> Path:
    """Where the cache keeps one pinned file of a release."""
    return cache_root / "upstream" / f"vllm-{version}" / Path(path).name


def cached_release_files(version: str, cache_root: Path) -> dict[str, Path] | None:
    """The release's pinned files from the cache, blob-checked; None if any is missing."""
    found = {path: cached_path(version, path, cache_root) for path in PINNED_FILES[version]}
    if not all(p.is_file() for p in found.values()):
        return None
    for path, cached in found.items():
        check(version, cached.read_bytes(), str(cached), path)
    return found


def release_files(version: str, cache_root: Path, python: Path) -> dict[str, Path]:
    """Every pinned file of a release (path in the wheel -> local copy), downloading the
    wheel once with `pip download --no-deps` when the cache lacks one."""
    found = cached_release_files(version, cache_root)
    if found is not None:
        return found
    folder = cached_path(version, SPARSE_MLA, cache_root).parent
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        subprocess.run(
            [str(python), "-m", "pip", "download", "-q", "--no-deps",
             "--only-binary", ":all:", "-d", tmp, f"vllm=={version}"],
            check=True, capture_output=True, timeout=900,
        )
        (wheel,) = Path(tmp).glob("vllm-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            contents = {path: zf.read(path) for path in PINNED_FILES[version]}
        for path, data in contents.items():
            check(version, data, wheel.name, path)
            target = cached_path(version, path, cache_root)
            part = target.with_suffix(".part")
            part.write_bytes(data)
            part.replace(target)
        shutil.rmtree(tmp, ignore_errors=True)
    return {path: cached_path(version, path, cache_root) for path in PINNED_FILES[version]}


def sparse_mla_source(version: str, cache_root: Path, python: Path) -> Path:
    """The release's sparse_mla.py, from the cache or from `pip download --no-deps`."""
    return release_files(version, cache_root, python)[SPARSE_MLA]
