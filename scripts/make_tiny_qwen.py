#!/usr/bin/env python3
"""Generate a tiny, random-weight Qwen2 model that the CPU build of vLLM can serve.

The model exists only so the remediation runner can be tested against a real
vLLM server: it has random weights (its output is gibberish), is about 1 MB,
and is generated in seconds from a fixed seed, so two runs write the same
bytes.

Layout written to OUT (the same as a Hugging Face checkpoint):

    config.json  generation_config.json
    model.safetensors                    (--shards 1, the default)
    model-0000N-of-0000M.safetensors + model.safetensors.index.json  (--shards M)
    tokenizer.json  tokenizer_config.json  (+ chat_template.jinja or
    special_tokens_map.json, depending on the transformers version)

Shape: hidden 128, 2 layers, 4 attention heads, 2 KV heads (head dim 32: the
CPU attention backend wants at least 32), vocab 512, max_position_embeddings
512 (so ``--max-model-len`` above 512 is refused). The tokenizer is a
byte-level BPE trained on a small built-in text.

Needs torch, transformers, tokenizers and safetensors: run it with the python
of the venv that ``scripts/setup-vllm.sh`` makes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

SEED = 1234
VOCAB_SIZE = 512
HIDDEN = 128
LAYERS = 2
HEADS = 4
KV_HEADS = 2
INTERMEDIATE = 256
MAX_POSITIONS = 512

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# A Qwen-style ChatML template, so /v1/chat/completions works too.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _corpus() -> list[str]:
    """A small, fixed training text for the tokenizer (deterministic)."""
    words = (
        "the quick brown fox jumps over the lazy dog while a server starts "
        "loading model weights from safetensors shards onto the device and "
        "the engine core reports that tensor parallel size must divide the "
        "number of attention heads ; hello world , how are you today ? "
        "vLLM serves an OpenAI compatible API with completions and chat . "
        "0 1 2 3 4 5 6 7 8 9 10 100 1000 port host health models tokens"
    ).split()
    lines = []
    for i in range(400):
        # A fixed pseudo-random walk over the word list: no RNG needed.
        n = 6 + (i * 7) % 11
        lines.append(" ".join(words[(i * 13 + j * (i % 5 + 1)) % len(words)] for j in range(n)))
    return lines


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    if tok.get_vocab_size() > VOCAB_SIZE:
        raise SystemExit(f"tokenizer vocab {tok.get_vocab_size()} > {VOCAB_SIZE}")

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        model_max_length=MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))


def build_model(out: Path, shards: int) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(SEED)
    config = Qwen2Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        max_window_layers=LAYERS,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        use_sliding_window=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    config.architectures = ["Qwen2ForCausalLM"]
    with torch.no_grad():
        model = Qwen2ForCausalLM(config)
        model.eval()
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # tied to embed_tokens: vLLM and HF skip it

    # transformers 5 calls it `dtype` (and warns on `torch_dtype`); 4.x `torch_dtype`.
    setattr(config, "dtype" if hasattr(config, "dtype") else "torch_dtype", torch.bfloat16)
    config.save_pretrained(str(out))
    # save_pretrained may add keys that depend on the transformers version;
    # they are harmless, and the file is the same for a given venv.

    names = sorted(state)
    if shards <= 1:
        save_file({k: state[k] for k in names}, str(out / "model.safetensors"), metadata={"format": "pt"})
    else:
        per = -(-len(names) // shards)
        weight_map: dict[str, str] = {}
        total = 0
        for i in range(shards):
            part = names[i * per : (i + 1) * per]
            if not part:
                raise SystemExit(f"too many shards ({shards}) for {len(names)} tensors")
            fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            save_file({k: state[k] for k in part}, str(out / fname), metadata={"format": "pt"})
            for k in part:
                weight_map[k] = fname
                total += state[k].numel() * state[k].element_size()
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")

    gen = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0, "do_sample": False, "max_new_tokens": 16}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="directory to write (replaced if present)")
    p.add_argument("--shards", type=int, default=1, help="number of safetensors shards (default 1)")
    args = p.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    out: Path = args.out.expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and swap in at the end, so a half-written model
    # never sits at OUT.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        build_tokenizer(tmp)
        build_model(tmp, args.shards)
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
