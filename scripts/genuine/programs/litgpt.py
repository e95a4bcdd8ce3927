"""LitGPT's command line (``litgpt generate``, ``convert_to_litgpt``, ``download``) on a machine without GPUs: a
healthy generation from a tiny random checkpoint, a checkpoint directory that is not there or lacks its tokenizer, a
config that does not fit the weights, 4-bit quantization without bitsandbytes, a conversion of a model LitGPT has no
config for, and a download in offline mode.

The checkpoint is written by ``make_ckpt.py`` inside the case: a one-layer ``pythia-14m``-shaped GPT with random
weights (``lit_model.pth`` + ``model_config.yaml``) and a word-level tokenizer from ``tokenizers``; only the
``litgpt`` command's own output is recorded.
"""

from case import OFFLINE_ENV, Case, Program, Release

MAKE_CKPT = '''\
import dataclasses, json, os, sys
import torch, yaml
from litgpt import GPT, Config
from tokenizers import Tokenizer, models, pre_tokenizers

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
cfg = Config.from_name("pythia-14m", n_layer=1, n_embd=32, n_head=2, padded_vocab_size=64, vocab_size=64,
                       block_size=64)
torch.manual_seed(0)
torch.save(GPT(cfg).state_dict(), f"{out}/lit_model.pth")
yaml.safe_dump(dataclasses.asdict(cfg), open(f"{out}/model_config.yaml", "w"))
vocab = {f"t{i}": i for i in range(60)} | {"<unk>": 60, "<s>": 61, "</s>": 62, " ": 63}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.save(f"{out}/tokenizer.json")
json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": False,
           "tokenizer_class": "PreTrainedTokenizerFast"}, open(f"{out}/tokenizer_config.json", "w"))
json.dump({"bos_token_id": 61, "eos_token_id": 62}, open(f"{out}/generation_config.json", "w"))
'''

# Build the checkpoint quietly, then run the shell line (the litgpt command, with any damage before it); a failed
# build exits 97, which no scenario expects.
BUILD = "{python} make_ckpt.py ckpt >/dev/null 2>&1 || { echo 'checkpoint build failed'; exit 97; }; "


def _cli(id: str, expect: list[str], line: str, note: str, *, build: bool = True, exit: str = "fail") -> Case:
    return Case(id=id, expect=expect, argv=["bash", "-c", (BUILD if build else "") + line],
                files={"make_ckpt.py": MAKE_CKPT}, env=dict(OFFLINE_ENV), note=note, exit=exit, timeout=240)


CASES = [
    _cli("generate-cpu-healthy", [], "{bin}/litgpt generate ckpt --prompt 't1 t2' --max_new_tokens 5",
         "healthy: a tiny random checkpoint generates five tokens on the CPU", exit="ok"),
    _cli("generate-checkpoint-dir-missing", ["model.file_missing"],
         "{bin}/litgpt generate checkpoints/Qwen/Qwen2.5-0.5B-Instruct --prompt hi",
         "generate pointed at a checkpoint directory that was never downloaded or converted here", build=False),
    _cli("generate-tokenizer-files-missing", ["model.file_missing"],
         "rm ckpt/tokenizer.json ckpt/tokenizer_config.json && {bin}/litgpt generate ckpt --prompt t1",
         "a checkpoint directory with the weights and config but without the tokenizer files (copied by hand)"),
    _cli("generate-config-does-not-fit-weights", ["model.weights_mismatch"],
         "sed -i 's/^n_embd: 32$/n_embd: 64/; s/^head_size: 16$/head_size: 32/' ckpt/model_config.yaml && "
         "{bin}/litgpt generate ckpt --prompt t1",
         "model_config.yaml of a wider model beside the weights of this one: load_state_dict's size mismatches"),
    _cli("generate-quantize-nf4-without-bitsandbytes", ["runtime.backend_mismatch"],
         "{bin}/litgpt generate ckpt --prompt t1 --quantize bnb.nf4",
         "--quantize bnb.nf4 in an environment without bitsandbytes"),
    _cli("convert-model-without-config", ["model.arch_unsupported"],
         "mkdir -p checkpoints/acme/acme-llm-7b && {bin}/litgpt convert_to_litgpt checkpoints/acme/acme-llm-7b",
         "convert_to_litgpt of a model whose name LitGPT has no config for (an architecture it does not support)",
         build=False),
    _cli("download-offline-not-cached", ["download.incomplete"],
         "{bin}/litgpt download EleutherAI/pythia-14m",
         "litgpt download with HF_HUB_OFFLINE=1 (a node without network) and nothing in the hub cache",
         build=False),
]

PROGRAM = Program(
    name="litgpt",
    releases=[
        Release(label="0.4.13", requirements=["torch==2.13.0", "litgpt==0.4.13", "requests", "numpy<2"]),
        Release(label="0.5.13", requirements=["torch==2.13.0", "litgpt==0.5.13", "requests", "numpy"]),
    ],
    cases=CASES,
    dist="litgpt",
)
