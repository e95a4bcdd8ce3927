"""PEFT (LoRA) as fine-tuning scripts use it: target modules that the base model does not have, an adapter loaded
onto a base of another size, an adapter directory without its config or its weights. The base models are tiny
random Qwen2 models built in the case's own script from a config (no files, no downloads).
"""

from case import Case, Program, Release

# Builds a tiny Qwen2 base (random weights) and saves a LoRA adapter for it in ./adapter.
BASE = """\
import os, pathlib, torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from peft import LoraConfig, PeftModel, get_peft_model
torch.manual_seed(0)


def tiny(hidden=64, inter=128):
    cfg = Qwen2Config(vocab_size=256, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return Qwen2ForCausalLM(cfg)


def save_adapter(path="adapter"):
    m = get_peft_model(tiny(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                          task_type="CAUSAL_LM"))
    m.save_pretrained(path)
    return pathlib.Path(path)
"""


# The hub's answer for a repo id that does not exist (401 RepoNotFound), from a local stand-in, so that a local
# path that is not a complete adapter gets the same answer it gets online. The port goes to ./port.
NOHUB = """\
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def answer(self):
        self.send_response(401)
        self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("X-Error-Message", "Repository not found")
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_HEAD = do_GET = answer
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open("port", "w").write(str(srv.server_address[1]))
srv.serve_forever()
"""
WITH_HUB = (
    "{python} nohub.py >/dev/null 2>&1 & SRV=$!; for i in $(seq 100); do [ -s port ] && break; sleep 0.1; done; "
    "HF_ENDPOINT=http://127.0.0.1:$(cat port) {python} train.py; rc=$?; kill $SRV; exit $rc"
)


def _case(id: str, expect: list[str], body: str, note: str, exit: str = "fail", online: bool = False) -> Case:
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", WITH_HUB] if online else ["{python}", "train.py"],
        files={"train.py": BASE + "\n" + body, **({"nohub.py": NOHUB} if online else {})},
        env={"HF_HUB_DISABLE_TELEMETRY": "1"} if online else {"HF_HUB_OFFLINE": "1"},
        input="transformers",
        note=note,
        exit=exit,
        timeout=180,
    )


CASES = [
    _case(
        "lora-ok-healthy",
        [],
        "m = get_peft_model(tiny(), LoraConfig(r=8, target_modules=['q_proj', 'k_proj', 'v_proj', 'o_proj'],"
        " task_type='CAUSAL_LM'))\nm.print_trainable_parameters()\nm.save_pretrained('adapter')\n"
        "print(PeftModel.from_pretrained(tiny(), 'adapter').active_adapter)\n",
        "healthy: LoRA on the attention projections, saved and loaded back",
        exit="ok",
    ),
    _case(
        "target-modules-not-found",
        ["config.bad_argument"],
        "m = get_peft_model(tiny(), LoraConfig(r=8, target_modules=['query_key_value', 'dense'],"
        " task_type='CAUSAL_LM'))\n",
        "target_modules named for another architecture (Falcon/BLOOM names on a Qwen2 model)",
    ),
    _case(
        "adapter-size-mismatch",
        ["model.weights_mismatch"],
        "save_adapter()\nm = PeftModel.from_pretrained(tiny(hidden=128, inter=256), 'adapter')\n",
        "an adapter trained on a hidden-64 base loaded onto a hidden-128 base",
    ),
    _case(
        "adapter-config-missing",
        ["model.format_mismatch"],
        "a = save_adapter()\n(a / 'adapter_config.json').unlink()\nm = PeftModel.from_pretrained(tiny(), str(a))\n",
        "the adapter directory has weights but no adapter_config.json",
    ),
    _case(
        "adapter-weights-missing",
        ["model.file_missing"],
        "a = save_adapter()\nfor f in a.glob('adapter_model.*'):\n    f.unlink()\n"
        "m = PeftModel.from_pretrained(tiny(), str(a))\n",
        "the adapter directory has its config but no adapter_model weights (online: the hub knows no such repo)",
        online=True,
    ),
    # --- more of what users hit (issue 26) --------------------------------------------------------------
    _case(
        "merge-and-generate-healthy",
        [],
        "a = save_adapter()\nm = PeftModel.from_pretrained(tiny(), str(a)).merge_and_unload()\n"
        "print(m.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=3, do_sample=False).tolist())\n",
        "healthy: an adapter loaded, merged into its base, and a few tokens generated",
        exit="ok",
    ),
    _case(
        "adapter-config-newer-key-healthy",
        [],
        "import json\na = save_adapter()\nc = json.loads((a / 'adapter_config.json').read_text())\n"
        "c['lora_ga_config'] = None\nc['use_qalora'] = False\nc['corda_config'] = None\n"
        "(a / 'adapter_config.json').write_text(json.dumps(c))\n"
        "print(PeftModel.from_pretrained(tiny(), str(a)).active_adapter)\n",
        "healthy: an adapter_config.json with keys a newer PEFT wrote; this release warns and ignores them",
        exit="ok",
    ),
    _case(
        "adapter-weights-truncated",
        ["model.shard_corrupt"],
        "a = save_adapter()\np = a / 'adapter_model.safetensors'\nb = p.read_bytes()\np.write_bytes(b[: len(b) // 2])\n"
        "m = PeftModel.from_pretrained(tiny(), str(a))\n",
        "adapter_model.safetensors cut to half its size (an interrupted copy)",
    ),
    _case(
        "lora-rank-zero",
        ["config.bad_argument"],
        "m = get_peft_model(tiny(), LoraConfig(r=0, target_modules=['q_proj'], task_type='CAUSAL_LM'))\n",
        "LoraConfig(r=0): the rank must be positive",
    ),
    # --- genuine sweep 2: adapters on other bases, unsupported targets, damaged configs, merging ---------------
    _case(
        "adapter-on-other-arch",
        ["model.weights_mismatch"],
        "from transformers import GPT2Config, GPT2LMHeadModel\na = save_adapter()\n"
        "gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=128))\n"
        "m = PeftModel.from_pretrained(gpt2, str(a))\n",
        "a LoRA adapter saved for a Qwen2 base (q_proj/v_proj) loaded onto a GPT-2 base, whose attention is c_attn:"
        " PEFT finds none of the adapter's target modules (https://github.com/huggingface/peft/issues/758)",
    ),
    _case(
        "target-module-unsupported-type",
        ["config.bad_argument"],
        "m = get_peft_model(tiny(), LoraConfig(r=8, target_modules=['input_layernorm'], task_type='CAUSAL_LM'))\n",
        "target_modules names the RMSNorm layers, a module type LoRA cannot wrap;"
        " https://github.com/hiyouga/LlamaFactory/issues/3720",
    ),
    _case(
        "adapter-config-truncated",
        ["model.format_mismatch"],
        "a = save_adapter()\np = a / 'adapter_config.json'\nb = p.read_bytes()\np.write_bytes(b[: len(b) // 2])\n"
        "m = PeftModel.from_pretrained(tiny(), str(a))\n",
        "adapter_config.json cut in half (an interrupted copy): not JSON any more;"
        " https://github.com/hiyouga/LlamaFactory/issues/3639",
    ),
    _case(
        "adapter-peft-type-unknown",
        ["model.arch_unsupported"],
        "import json\na = save_adapter()\nc = json.loads((a / 'adapter_config.json').read_text())\n"
        "c['peft_type'] = 'LORA_PLUS_PLUS'\n(a / 'adapter_config.json').write_text(json.dumps(c))\n"
        "m = PeftModel.from_pretrained(tiny(), str(a))\n",
        "adapter_config.json names a peft_type this PEFT release does not know (an adapter method added in a newer"
        " PEFT); https://github.com/huggingface/peft/issues/662",
    ),
    _case(
        "adapter-vocab-resized",
        ["model.weights_mismatch"],
        "base = tiny()\nbase.resize_token_embeddings(300)\n"
        "m = get_peft_model(base, LoraConfig(r=4, target_modules=['q_proj', 'v_proj'], modules_to_save=['lm_head',"
        " 'embed_tokens'], task_type='CAUSAL_LM'))\n"
        "m.save_pretrained('adapter')\n"
        "m = PeftModel.from_pretrained(tiny(), 'adapter')\n",
        "an adapter trained after adding tokens (embeddings resized, lm_head/embed_tokens in modules_to_save) loaded"
        " onto the original base without the resize; https://github.com/huggingface/peft/issues/1300",
    ),
    _case(
        "two-adapters-with-bias",
        ["config.bad_argument"],
        "for name in ('a1', 'a2'):\n"
        "    get_peft_model(tiny(), LoraConfig(r=4, target_modules=['q_proj', 'v_proj'], bias='all',"
        " task_type='CAUSAL_LM')).save_pretrained(name)\n"
        "m = PeftModel.from_pretrained(tiny(), 'a1', adapter_name='a1')\n"
        "m.load_adapter('a2', adapter_name='a2')\n",
        "two LoRA adapters trained with bias='all' loaded onto one base (multi-adapter serving);"
        " https://github.com/huggingface/peft/issues/2112",
    ),
    _case(
        "lora-train-step-healthy",
        [],
        "m = get_peft_model(tiny(), LoraConfig(r=4, target_modules='all-linear', task_type='CAUSAL_LM'))\n"
        "m.print_trainable_parameters()\nopt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad])\n"
        "x = torch.randint(0, 256, (2, 16))\nfor _ in range(2):\n"
        "    loss = m(input_ids=x, labels=x).loss\n    loss.backward()\n    opt.step()\n    opt.zero_grad()\n"
        "    print('loss', round(loss.item(), 3))\n"
        "m.merge_and_unload().save_pretrained('merged')\nprint(sorted(os.listdir('merged')))\n",
        "healthy: two optimizer steps of LoRA on all linear layers, merged and saved",
        exit="ok",
    ),
]

# --- issue 26 (helper 2) ----------------------------------------------------------------------------------------
CASES += [
    _case(
        "adapter-loaded-frozen-backward",
        ["config.bad_argument"],
        "save_adapter()\n"
        "m = PeftModel.from_pretrained(tiny(), 'adapter')\n"
        "m.train()\n"
        "out = m(input_ids=torch.tensor([[1, 2, 3, 4]]), labels=torch.tensor([[1, 2, 3, 4]]))\n"
        "out.loss.backward()\n",
        "resuming LoRA training from a saved adapter loaded without is_trainable=True: no parameter requires grad;"
        " https://github.com/huggingface/peft/issues/1167",
    ),
    _case(
        "loraconfig-unknown-kwarg",
        ["config.bad_argument"],
        "cfg = LoraConfig(lora_rank=8, target_modules=['q_proj'], task_type='CAUSAL_LM')\n",
        "LoraConfig with a keyword it does not have (lora_rank for r)",
    ),
    _case(
        "get-peft-model-twice-healthy",
        [],
        "m = get_peft_model(tiny(), LoraConfig(r=4, target_modules=['q_proj'], task_type='CAUSAL_LM'))\n"
        "m = get_peft_model(m, LoraConfig(r=4, target_modules=['v_proj'], task_type='CAUSAL_LM'))\n"
        "m.print_trainable_parameters()\n",
        "healthy: get_peft_model on a model that already has LoRA layers (the 'modify a model with PEFT for a"
        " second time' warning only)",
        exit="ok",
    ),
]

PROGRAM = Program(
    name="peft",
    releases=[
        Release(label="0.13.2", requirements=["peft==0.13.2", "transformers==4.46.3", "torch==2.13.0",
                                              "accelerate==1.15.0"]),
        Release(label="0.21.2", requirements=["peft==0.21.2", "transformers==5.24.0", "torch==2.13.0",
                                              "accelerate==1.15.0"]),
    ],
    cases=CASES,
)
