"""What the side-by-side benchmark times as "upstream" really is upstream's builder.

``benchmarks/bench_c128a_upstream.py`` runs each release's blob-pinned ``sparse_mla.py``
without vLLM, behind an inert stand-in ``vllm`` package (``benchmarks/upstream_c128a.py``).
Here that loading runs on the CPU under Triton's interpreter, in a process with no vLLM
at all, and each release's builder must do exactly what our builder for its layout does
(the differential test's inputs and reads): a stand-in that changed upstream's behaviour,
or that fell back to anything but upstream's code, would fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from upstream_sources import PINNED_FILES, release_files
from vllm_harness import HERE, cache_root

pytestmark = pytest.mark.vllm

REPO = HERE.parents[1]

SCRIPT = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path[:0] = [sys.argv[2], sys.argv[3]]
    import c128a_differential as diff
    import upstream_c128a
    from server_patch.c128a import builder

    files = json.loads(Path(sys.argv[1]).read_text())
    compared = 0
    for layout, release in upstream_c128a.RELEASE_OF_LAYOUT.items():
        up = upstream_c128a.load_builder(
            release, {k: Path(v) for k, v in files[release].items()})
        assert up.__module__.startswith("dsv4_qual_upstream."), up.__module__
        ours = builder(layout, impl="triton")
        for width in (128, 256):
            for seed in diff.SEEDS:
                inputs = diff.make_inputs(seed, width, bounded=True)
                # 0.28.0's caller passes the capacity; 0.29+ callers the active width.
                up_width = diff.CAPACITY if layout == "capacity" else width
                want = diff.run_one(up, inputs, up_width)
                got = diff.run_one(ours, inputs, width)
                assert got == want, (layout, release, width, seed)
                compared += 1
    assert not [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]
    print(f"identical in {compared} cases, no vllm imported")
""")


def test_upstream_builders_run_without_vllm_and_match_ours(tmp_path: Path) -> None:
    files = {release: {path: str(local) for path, local in
                       release_files(release, cache_root(), Path(sys.executable)).items()}
             for release in PINNED_FILES}
    (tmp_path / "files.json").write_text(json.dumps(files))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "files.json"), str(REPO / "benchmarks"),
         str(HERE)],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "identical in 24 cases, no vllm imported" in done.stdout
