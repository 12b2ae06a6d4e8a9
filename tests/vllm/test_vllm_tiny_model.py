"""The tiny model is what the other `vllm` tests assume: deterministic, local, reasoning-first."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import jinja2
import pytest
import tiny_model as recipe

pytestmark = pytest.mark.vllm


def _build(python: Path, out: Path) -> dict[str, object]:
    done = subprocess.run([str(python), str(Path(recipe.__file__)), "build", str(out)],
                          capture_output=True, text=True, timeout=300, check=True,
                          env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                               "PATH": "/usr/bin:/bin"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_two_builds_are_byte_identical_and_need_no_hub(vllm_python: Path,
                                                       tmp_path: Path) -> None:
    # HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE: a hub lookup would raise instead of downloading.
    first = _build(vllm_python, tmp_path / "a")
    second = _build(vllm_python, tmp_path / "b")
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b")
    assert first["think_end_id"] == second["think_end_id"] == 4


def test_tokenizer_and_template(tiny_model: dict[str, object]) -> None:
    folder = Path(str(tiny_model["path"]))
    tok = json.loads((folder / "tokenizer.json").read_text())
    added = {t["content"]: (t["id"], t["special"]) for t in tok["added_tokens"]}
    assert added["<think>"] == (tiny_model["think_start_id"], True)
    assert added["</think>"] == (tiny_model["think_end_id"], True)
    config = json.loads((folder / "config.json").read_text())
    assert config["head_dim"] in recipe.CPU_ATTENTION_HEAD_SIZES
    template = jinja2.Template((folder / "chat_template.jinja").read_text())
    prompt = template.render(messages=[{"role": "user", "content": "hi"}],
                             add_generation_prompt=True)
    # The reply starts inside the reasoning channel, as DeepSeek-V4's does.
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"
