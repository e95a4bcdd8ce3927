"""bitsandbytes on a host without a GPU (a CPU node, a container started without ``--gpus``): what the library
prints when it is imported, when transformers is asked for a 4-bit or 8-bit model through ``BitsAndBytesConfig``,
and when its layers, quantisation functions and 8-bit optimizers are called directly. The model is a tiny random
Qwen2 saved by the case's own script (no downloads).
"""

from case import OFFLINE_ENV, Case, Program, Release

# Saves a tiny random Qwen2 causal LM (and no tokenizer) to ./tiny.
TINY = """\
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM
torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
Qwen2ForCausalLM(cfg).save_pretrained("tiny")
"""


def _case(id, expect, body, note, exit="fail", **kw):
    return Case(
        id=id,
        expect=expect,
        argv=["{python}", "run.py"],
        files={"run.py": TINY + "\n" + body},
        env=dict(OFFLINE_ENV),
        input="transformers",
        note=note,
        exit=exit,
        timeout=240,
        **kw,
    )


CASES = [
    _case(
        "import-cpu-only",
        ["runtime.backend_mismatch"],
        "import bitsandbytes as bnb\nprint('bitsandbytes', bnb.__version__)\n",
        "bitsandbytes imported on a CPU-only host, nothing used: 0.41-0.43 warn that the build has no GPU support"
        " (and print the failed probe of their CPU library); newer releases have a CPU backend",
        exit="ok",
        expect_by={"0.50.2": []},
    ),
    _case(
        "load-4bit-no-gpu",
        ["runtime.backend_mismatch"],
        "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
        "q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_compute_dtype=torch.float32)\n"
        "m = AutoModelForCausalLM.from_pretrained('tiny', quantization_config=q)\n"
        "print(m(torch.tensor([[1, 2, 3]])).logits.shape)\n",
        "QLoRA-style 4-bit (nf4) load through transformers' BitsAndBytesConfig on a host without a GPU; transformers"
        " 4.46 counts bitsandbytes as unavailable without CUDA and says to install its latest version; bitsandbytes"
        " 0.50 with transformers 5 quantises on the CPU",
        exit="any",
        expect_by={"0.50.2": []},
    ),
    _case(
        "load-8bit-no-gpu",
        ["runtime.backend_mismatch"],
        "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
        "m = AutoModelForCausalLM.from_pretrained('tiny', quantization_config=BitsAndBytesConfig(load_in_8bit=True))\n"
        "print(m(torch.tensor([[1, 2, 3]])).logits.shape)\n",
        "LLM.int8 8-bit load through BitsAndBytesConfig on a host without a GPU",
        exit="any",
        expect_by={"0.50.2": []},
    ),
    _case(
        "load-4bit-device-map-cuda",
        ["runtime.backend_mismatch"],
        "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
        "q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float32)\n"
        "m = AutoModelForCausalLM.from_pretrained('tiny', quantization_config=q, device_map={'': 0})\n",
        "4-bit load with device_map={'': 0} (the usual QLoRA recipe line) on a host without a GPU",
        expect_by={"0.50.2": ["runtime.no_gpu_visible"]},
    ),
    _case(
        "optim-8bit-cpu",
        ["runtime.backend_mismatch"],
        "import bitsandbytes as bnb\nm = torch.nn.Linear(64, 64)\nopt = bnb.optim.AdamW8bit(m.parameters(), lr=1e-3)\n"
        "m(torch.randn(4, 64)).sum().backward()\nopt.step()\nprint('step done')\n",
        "an 8-bit AdamW step on CPU parameters (the optimizer a QLoRA script picks)",
        exit="any",
        expect_by={"0.50.2": []},
    ),
    _case(
        "linear4bit-cuda-no-gpu",
        ["runtime.backend_mismatch"],
        "import bitsandbytes as bnb\nlayer = bnb.nn.Linear4bit(64, 64, compute_dtype=torch.float32).to('cuda')\n",
        "a bnb Linear4bit layer moved to cuda (where it is quantised) on a host without a GPU (a CPU build of torch)",
    ),
]

PROGRAM = Program(
    name="bitsandbytes",
    releases=[
        Release(label="0.42.0", requirements=["bitsandbytes==0.42.0", "transformers==4.46.3", "torch==2.13.0",
                                              "accelerate==1.15.0"]),
        Release(label="0.50.2", requirements=["bitsandbytes==0.50.2", "transformers==5.24.0", "torch==2.13.0",
                                              "accelerate==1.15.0"]),
    ],
    cases=CASES,
)
