"""transformers as users call it: from_pretrained on a local checkpoint that is missing, damaged or mismatched,
AutoTokenizer without the files or libraries it needs, Trainer arguments that cannot run on this machine, and
hub look-ups with no way to the hub. Every model is a tiny random Qwen2 that ``scripts/make_tiny_qwen.py``
writes inside the case (no downloads); damage is done by the case's own script before the real call.
"""

from pathlib import Path

from case import MAKE_TINY, Case, Program, Release


def _hub_module():
    """hub.py beside this file (programs are loaded by path, not as a package): its local stand-in for the hub."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("genuine_program_hub", Path(__file__).with_name("hub.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


HUB = _hub_module()
FAKEHUB = HUB.FAKEHUB


# Build the tiny model quietly, then run the user's script: only the script's output is the case.
BUILD = "{python} make_tiny_qwen.py {work}/tiny {shards} >/dev/null 2>&1 || {{ echo 'tiny model build failed'; exit 97; }}; "

# A closed local port: "no network to the hub" without touching the network.
CLOSED = "http://127.0.0.1:9"

OFFLINE_ENV = {"HF_HOME": "{work}/hf-home", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _script_case(id: str, expect: list[str], script: str, *, shards: int = 1, env: dict | None = None,
                 note: str = "", exit: str = "fail", model: bool = True, extra: dict | None = None,
                 timeout: float = 240.0, releases: tuple[str, ...] | None = None,
                 also: list[str] | None = None) -> Case:
    """A case that builds the tiny model (unless ``model`` is false) and runs ``main.py`` with the venv python."""
    files: dict[str, str | bytes] = {"main.py": script}
    if model:
        files["make_tiny_qwen.py"] = MAKE_TINY
    files.update(extra or {})
    prefix = BUILD.format(python="{python}", work="{work}", shards=f"--shards {shards}") if model else ""
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", prefix + "exec {python} main.py"],
        files=files,
        env={"HF_HOME": "{work}/hf-home", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})},
        input="transformers",
        note=note,
        exit=exit,
        timeout=timeout,
        releases=releases,
        also=list(also or []),
    )


LOAD = """\
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("{work}/tiny")
print(model.config.model_type)
"""


# from_pretrained of a hub id against the local stand-in (started by main.py itself, in the given mode)
HUB_LOAD = """\
import os, subprocess, sys, time
srv = subprocess.Popen([sys.executable, "fakehub.py", "%s"])
for _ in range(100):
    if os.path.exists("port") and open("port").read():
        break
    time.sleep(0.1)
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:" + open("port").read()
try:
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained("tiny-org/tiny-model")
finally:
    srv.kill()
"""
HUB_ENV = {"HF_HUB_OFFLINE": "0", "HF_HUB_ETAG_TIMEOUT": "3", "HF_HUB_DOWNLOAD_TIMEOUT": "3"}


def _hub_case(id: str, expect: list[str], mode: str, note: str) -> Case:
    """from_pretrained of a hub id while the local stand-in answers in ``mode`` (hub.py's FAKEHUB)."""
    return _script_case(id, expect, HUB_LOAD % mode, model=False, extra={"fakehub.py": FAKEHUB}, env=HUB_ENV,
                        note=note)


def _damage_then_load(damage: str, load: str = LOAD) -> str:
    return "import json, os, pathlib\nM = pathlib.Path('{work}/tiny')\n" + damage + "\n" + load


CASES = [
    _script_case(
        "load-ok-healthy",
        [],
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny')\n"
        "ids = tok('the quick brown fox', return_tensors='pt').input_ids\n"
        "out = model.generate(ids, max_new_tokens=4, do_sample=False)\n"
        "print(tok.decode(out[0]))\n",
        exit="ok",
        note="healthy: a tiny local Qwen2 loads and generates (generation-config warnings only)",
    ),
    _script_case(
        "seqcls-newly-initialized-healthy",
        [],
        "from transformers import AutoModelForSequenceClassification\n"
        "model = AutoModelForSequenceClassification.from_pretrained('{work}/tiny', num_labels=3)\n"
        "print(type(model).__name__)\n",
        exit="ok",
        note="healthy: a classification head on a causal LM checkpoint is new by design: 'Some weights of ... were"
        " not initialized ... You should probably TRAIN this model' is the normal start of fine-tuning",
    ),
    _script_case(
        "no-config",
        ["model.format_mismatch"],
        _damage_then_load("(M / 'config.json').unlink()"),
        note="the model directory has no config.json",
    ),
    _script_case(
        "config-not-json",
        ["model.format_mismatch"],
        _damage_then_load("(M / 'config.json').write_bytes(b'GGUF\\x03\\x00\\x00\\x00' + bytes(64))"),
        note="config.json holds binary (a GGUF header), not JSON",
    ),
    _script_case(
        "no-weights",
        ["model.format_mismatch"],
        _damage_then_load("(M / 'model.safetensors').unlink()"),
        note="config.json is there, the weight file is not (the message is the one a folder of only GGUF/other"
        " weights gets: no weights in a format transformers loads)",
    ),
    _script_case(
        "missing-shard",
        ["model.shard_missing"],
        _damage_then_load("(M / 'model-00002-of-00002.safetensors').unlink()"),
        shards=2,
        note="two-shard checkpoint, the second shard deleted (the index still names it)",
    ),
    _script_case(
        "truncated-safetensors",
        ["model.shard_corrupt"],
        _damage_then_load("p = M / 'model.safetensors'; b = p.read_bytes(); p.write_bytes(b[: len(b) // 3])"),
        note="model.safetensors cut to a third of its size (an interrupted copy)",
    ),
    _script_case(
        "lfs-pointer-safetensors",
        ["model.shard_corrupt"],
        _damage_then_load(
            "(M / 'model.safetensors').write_text('version https://git-lfs.github.com/spec/v1\\n'"
            " 'oid sha256:4d1c0d3f3b2e8e5a6f7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f\\nsize 1048576\\n')"
        ),
        note="model.safetensors is a Git LFS pointer (cloned without git-lfs)",
    ),
    _script_case(
        "size-mismatch",
        ["model.weights_mismatch"],
        _damage_then_load(
            "c = json.loads((M / 'config.json').read_text()); c['intermediate_size'] = 384\n"
            "(M / 'config.json').write_text(json.dumps(c))"
        ),
        note="config.json's intermediate_size (384) does not match the checkpoint's MLP weights (256)",
    ),
    _script_case(
        "unknown-model-type",
        ["model.arch_unsupported"],
        _damage_then_load(
            "c = json.loads((M / 'config.json').read_text()); c['model_type'] = 'qwen9_moe'\n"
            "(M / 'config.json').write_text(json.dumps(c))"
        ),
        note="config.json names a model_type this transformers release does not know",
    ),
    _script_case(
        "trust-remote-code",
        ["model.arch_unsupported"],
        _damage_then_load(
            "c = json.loads((M / 'config.json').read_text()); c['model_type'] = 'tinycustom'\n"
            "c['auto_map'] = {'AutoConfig': 'configuration_tiny.TinyConfig',"
            " 'AutoModelForCausalLM': 'modeling_tiny.TinyForCausalLM'}\n"
            "(M / 'config.json').write_text(json.dumps(c))\n"
            "(M / 'configuration_tiny.py').write_text('from transformers import PretrainedConfig\\n"
            "class TinyConfig(PretrainedConfig):\\n    model_type = \"tinycustom\"\\n')"
        ),
        note="a custom-code architecture (auto_map) loaded without trust_remote_code, stdin not a terminal",
    ),
    _script_case(
        "flash-attn-missing",
        ["runtime.backend_mismatch"],
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', attn_implementation='flash_attention_2')\n",
        note="attn_implementation='flash_attention_2' where flash-attn is not installed (and no GPU); 4.46.3 loads"
        " the model without a word on a CPU-only torch, so the case is 5.x only",
        releases=("5.24.0", "5.25.0"),
    ),
    _script_case(
        "tokenizer-files-missing",
        ["model.format_mismatch"],
        _damage_then_load(
            "for f in ('tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'chat_template.jinja'):\n"
            "    if (M / f).exists(): (M / f).unlink()",
            "from transformers import AutoTokenizer\ntok = AutoTokenizer.from_pretrained('{work}/tiny')\nprint(tok)\n",
        ),
        note="the checkpoint has weights but no tokenizer files (5.x builds an empty tokenizer instead of failing)",
        releases=("4.46.3",),
    ),
    _script_case(
        "sentencepiece-missing",
        ["runtime.backend_mismatch"],
        "import pathlib\n"
        "M = pathlib.Path('{work}/spm'); M.mkdir()\n"
        "(M / 'tokenizer.model').write_bytes(bytes(range(256)) * 4)\n"
        "(M / 'tokenizer_config.json').write_text('{\"tokenizer_class\": \"LlamaTokenizer\"}')\n"
        "(M / 'config.json').write_text('{\"model_type\": \"llama\"}')\n"
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(str(M))\n",
        model=False,
        note="a SentencePiece tokenizer (tokenizer.model, no tokenizer.json) in a venv without sentencepiece",
    ),
    _script_case(
        "trainer-fp16-and-bf16",
        ["config.bad_argument"],
        "from transformers import TrainingArguments\n"
        "args = TrainingArguments(output_dir='{work}/out', fp16=True, bf16=True, report_to=[], use_cpu=True)\n",
        model=False,
        note="fp16 and bf16 mixed precision both switched on",
    ),
    _script_case(
        "trainer-train-healthy",
        [],
        "import torch\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', torch_dtype=torch.float32)\n"
        "rows = [tok('the quick brown fox jumps over the lazy dog')['input_ids']] * 8\n"
        "data = [dict(input_ids=r, attention_mask=[1] * len(r), labels=r) for r in rows]\n"
        "args = TrainingArguments(output_dir='{work}/out', max_steps=2, per_device_train_batch_size=2,"
        " logging_steps=1, report_to=[], use_cpu=True, save_strategy='no')\n"
        "Trainer(model=model, args=args, train_dataset=data).train()\n",
        exit="ok",
        note="healthy: two Trainer steps of the tiny model on CPU (start-up and logging lines only)",
    ),
    _script_case(
        "trainer-strategy-mismatch",
        ["config.bad_argument"],
        "from transformers import TrainingArguments\n"
        "args = TrainingArguments(output_dir='{work}/out', eval_strategy='steps', save_strategy='epoch',"
        " load_best_model_at_end=True, report_to=[], use_cpu=True)\n",
        model=False,
        note="load_best_model_at_end with save and eval strategies that differ",
    ),
    _script_case(
        "trainer-bad-scheduler",
        ["config.bad_argument"],
        "from transformers import TrainingArguments\n"
        "args = TrainingArguments(output_dir='{work}/out', lr_scheduler_type='cosine_with_warmup', report_to=[],"
        " use_cpu=True)\n",
        model=False,
        note="an lr_scheduler_type that is not one of SchedulerType's values",
    ),
    _script_case(
        "offline-not-cached",
        ["download.incomplete"],
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('Qwen/Qwen2.5-0.5B-Instruct')\n",
        model=False,
        env=OFFLINE_ENV,
        note="HF_HUB_OFFLINE=1 and an empty cache: a hub model id cannot be resolved",
    ),
    _script_case(
        "hub-unreachable",
        ["download.incomplete"],
        "from transformers import AutoConfig\n"
        "config = AutoConfig.from_pretrained('Qwen/Qwen2.5-0.5B-Instruct')\n",
        model=False,
        env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": CLOSED, "HF_HUB_ETAG_TIMEOUT": "3", "HF_HUB_DOWNLOAD_TIMEOUT": "3"},
        note="HF_ENDPOINT points at a closed local port: connection refused, nothing cached",
    ),
    # --- more of what users hit (issue 26) ------------------------------------------------------------------
    _script_case(
        "pipeline-generate-healthy",
        [],
        "from transformers import pipeline\n"
        "pipe = pipeline('text-generation', model='{work}/tiny', device='cpu')\n"
        "print(pipe('hello there', max_new_tokens=5, do_sample=False)[0]['generated_text'])\n",
        exit="ok",
        note="healthy: a text-generation pipeline on the tiny local model",
    ),
    _script_case(
        "tokenize-longer-than-model-healthy",
        [],
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny', model_max_length=64)\n"
        "ids = tok('the quick brown fox jumps over the lazy dog ' * 40)['input_ids']\n"
        "print(len(ids), 'tokens')\n",
        exit="ok",
        note="healthy: a text longer than the tokenizer's model_max_length is tokenized; transformers warns that"
        " indexing it through the model would fail",
    ),
    _script_case(
        "config-offline-cached-healthy",
        [],
        "from transformers import AutoConfig\n"
        "print(AutoConfig.from_pretrained('tiny-org/tiny-model').model_type)\n",
        model=False,
        env=OFFLINE_ENV,
        extra=HUB.CACHED,
        exit="ok",
        note="healthy: AutoConfig of a hub id in offline mode, its config.json in the local cache",
    ),
    _hub_case("hub-gated", ["download.incomplete"], "gated",
              "from_pretrained of a gated repo the account has no access to (a local stand-in answers 403 GatedRepo)"),
    _hub_case("hub-repo-not-found", ["config.bad_argument"], "notfound",
              "from_pretrained of a repo id the hub does not have (404 RepoNotFound)"),
    _hub_case("hub-unauthorized", ["config.bad_argument"], "unauthorized",
              "from_pretrained of a private repo without a valid token (401)"),
    _hub_case("hub-server-error", ["download.incomplete"], "servererror", "from_pretrained while the hub answers 500"),
    _script_case(
        "local-path-missing",
        ["config.bad_argument"],
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('/models/Qwen2.5-7B-Instruct')\n",
        model=False,
        env=OFFLINE_ENV,
        note="a local model path that does not exist on this node (offline, so it is no hub id either)",
    ),
    _script_case(
        "truncated-bin",
        ["model.shard_corrupt"],
        _damage_then_load(
            "import torch\nfrom safetensors.torch import load_file\n"
            "torch.save(load_file(str(M / 'model.safetensors')), str(M / 'pytorch_model.bin'))\n"
            "(M / 'model.safetensors').unlink()\n"
            "p = M / 'pytorch_model.bin'; b = p.read_bytes(); p.write_bytes(b[: len(b) // 2])"
        ),
        note="the checkpoint's pytorch_model.bin cut to half its size (an interrupted copy)",
    ),
    _script_case(
        "safetensors-header-garbage",
        ["model.shard_corrupt"],
        _damage_then_load(
            "p = M / 'model.safetensors'; b = bytearray(p.read_bytes()); b[8:40] = b'\\xff' * 32\n"
            "p.write_bytes(bytes(b))"
        ),
        note="the safetensors JSON header overwritten with bytes that are not UTF-8 (a damaged disk block)",
    ),
    _script_case(
        "device-map-cuda-without-gpu",
        ["runtime.backend_mismatch"],
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', device_map='cuda')\n",
        note="device_map='cuda' with a CPU-only torch build",
    ),
    # --- genuine sweep 2: dtype/device/quantization arguments, remote code, generation, chat templates, Trainer ---
    _script_case(
        "bnb-4bit-not-installed",
        ["runtime.backend_mismatch"],
        "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
        "q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype='float16')\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', quantization_config=q)\n",
        note="4-bit quantization_config where bitsandbytes is not installed (and no GPU);"
        " https://github.com/huggingface/diffusers/issues/3194",
    ),
    _script_case(
        "torch-dtype-unknown",
        ["config.bad_argument"],
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', torch_dtype='bfloat')\n",
        note="torch_dtype given as a string that names no torch dtype ('bfloat' for 'bfloat16');"
        " https://github.com/mlflow/mlflow/pull/11295",
    ),
    _script_case(
        "chat-template-unset",
        ["config.bad_argument"],
        _damage_then_load(
            "c = json.loads((M / 'tokenizer_config.json').read_text()); c.pop('chat_template', None)\n"
            "(M / 'tokenizer_config.json').write_text(json.dumps(c))\n"
            "if (M / 'chat_template.jinja').exists(): (M / 'chat_template.jinja').unlink()",
            "from transformers import AutoTokenizer\ntok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
            "print(tok.apply_chat_template([{'role': 'user', 'content': 'hi'}], tokenize=False))\n",
        ),
        note="apply_chat_template on a base-model tokenizer that ships no chat template;"
        " https://github.com/huggingface/transformers/issues/33246",
    ),
    _script_case(
        "generate-temperature-zero",
        ["config.bad_argument"],
        "from transformers import AutoModelForCausalLM\nimport torch\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny')\n"
        "model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=4, do_sample=True, temperature=0.0)\n",
        note="sampling with temperature=0.0 (an OpenAI-style 'greedy' setting that generate refuses);"
        " https://github.com/meta-llama/llama/issues/687",
    ),
    _script_case(
        "remote-code-file-missing",
        ["model.file_missing"],
        _damage_then_load(
            "c = json.loads((M / 'config.json').read_text()); c['model_type'] = 'tinycustom'\n"
            "c['auto_map'] = {'AutoConfig': 'configuration_tiny.TinyConfig',"
            " 'AutoModelForCausalLM': 'modeling_tiny.TinyForCausalLM'}\n"
            "(M / 'config.json').write_text(json.dumps(c))",
            "from transformers import AutoModelForCausalLM\n"
            "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', trust_remote_code=True)\n",
        ),
        note="trust_remote_code=True but the checkpoint copy lacks the .py files its auto_map names;"
        " https://github.com/huggingface/transformers/issues/46165",
    ),
    _script_case(
        "remote-code-trusted-healthy",
        [],
        _damage_then_load(
            "c = json.loads((M / 'config.json').read_text()); c['model_type'] = 'tinycustom'\n"
            "c['auto_map'] = {'AutoConfig': 'configuration_tiny.TinyConfig',"
            " 'AutoModelForCausalLM': 'modeling_tiny.TinyForCausalLM'}\n"
            "(M / 'config.json').write_text(json.dumps(c))\n"
            "(M / 'configuration_tiny.py').write_text('from transformers import Qwen2Config\\n"
            "class TinyConfig(Qwen2Config):\\n    model_type = \"tinycustom\"\\n')\n"
            "(M / 'modeling_tiny.py').write_text('from transformers import Qwen2ForCausalLM\\n"
            "from .configuration_tiny import TinyConfig\\n"
            "class TinyForCausalLM(Qwen2ForCausalLM):\\n    config_class = TinyConfig\\n')",
            "from transformers import AutoModelForCausalLM\n"
            "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', trust_remote_code=True)\n"
            "print(type(model).__name__)\n",
        ),
        exit="ok",
        note="healthy: a custom-code architecture loaded with trust_remote_code=True (its warnings only)",
    ),
    _script_case(
        "disk-offload-healthy",
        [],
        "from transformers import AutoModelForCausalLM\nimport torch\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', device_map='auto', max_memory={'cpu': '200KB'},"
        " offload_folder='{work}/offload')\n"
        "print(model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=2, do_sample=False).tolist())\n",
        exit="ok",
        releases=("5.24.0", "5.25.0"),
        note="healthy: device_map='auto' with a max_memory smaller than the model, so weights go to disk offload"
        " (the 'offloaded to the disk' / meta-device warnings are expected); users meet the same words before the"
        " offload_folder error of https://github.com/haotian-liu/LLaVA/issues/1728 (4.46.3 with accelerate 1.15 fails"
        " on the tied lm_head instead, a KeyError in accelerate's offload index: 5.x only)",
    ),
    _script_case(
        "tokenizer-json-truncated",
        ["model.format_mismatch"],
        _damage_then_load(
            "p = M / 'tokenizer.json'; b = p.read_bytes(); p.write_bytes(b[: len(b) // 2])",
            "from transformers import AutoTokenizer\ntok = AutoTokenizer.from_pretrained('{work}/tiny')\n",
        ),
        note="tokenizer.json cut in half (an interrupted copy);"
        " https://github.com/FlagAI-Open/Aquila2/issues/63",
    ),
    _script_case(
        "resume-checkpoint-missing",
        ["config.bad_argument"],
        "from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny')\n"
        "r = tok('the quick brown fox')['input_ids']\n"
        "data = [dict(input_ids=r, attention_mask=[1] * len(r), labels=r)] * 4\n"
        "args = TrainingArguments(output_dir='{work}/out', max_steps=1, report_to=[], use_cpu=True)\n"
        "Trainer(model=model, args=args, train_dataset=data).train(resume_from_checkpoint='{work}/out/checkpoint-500')\n",
        note="resume_from_checkpoint names a checkpoint folder that is not there;"
        " https://github.com/artidoro/qlora/issues/27",
    ),
    _script_case(
        "pad-token-missing",
        ["config.bad_argument"],
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
        "tok.pad_token = None\n"
        "print(tok(['a b c', 'a'], padding=True, return_tensors='pt'))\n",
        note="batch padding with a tokenizer that has no pad token (a base model's tokenizer);"
        " https://github.com/huggingface/trl/issues/466",
    ),
    _script_case(
        "host-oom-from-config",
        ["memory.host_oom"],
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "from transformers import Qwen2Config, AutoModelForCausalLM\n"
        "cfg = Qwen2Config(vocab_size=152064, hidden_size=8192, intermediate_size=29568, num_hidden_layers=4,"
        " num_attention_heads=64, num_key_value_heads=8)\n"
        "model = AutoModelForCausalLM.from_config(cfg)\n",
        model=False,
        note="a 72B-shaped model built on a host whose memory (an address-space limit here) cannot hold it;"
        " https://github.com/huggingface/transformers/issues/23016",
    ),
    _script_case(
        "gptq-checkpoint-without-optimum",
        ["runtime.backend_mismatch"],
        _damage_then_load(
            "c = json.loads((M / 'config.json').read_text())\n"
            "c['quantization_config'] = {'quant_method': 'gptq', 'bits': 4, 'group_size': 128, 'desc_act': False,"
            " 'sym': True}\n"
            "(M / 'config.json').write_text(json.dumps(c))"
        ),
        note="a GPTQ-quantized checkpoint (quantization_config in config.json) loaded where optimum / a GPTQ kernel"
        " package is not installed; https://github.com/huggingface/text-generation-inference/issues/1006",
    ),
    _script_case(
        "safetensors-saved-without-metadata",
        ["model.format_mismatch"],
        _damage_then_load(
            "from safetensors.torch import load_file, save_file\n"
            "sd = load_file(str(M / 'model.safetensors'))\n"
            "save_file(sd, str(M / 'model.safetensors'))"
        ),
        releases=("4.46.3",),
        note="model.safetensors re-saved with safetensors' own save_file (no format metadata, as merge/convert"
        " scripts do); 4.x reads metadata['format'] and fails, 5.x loads it:"
        " https://github.com/hiyouga/LlamaFactory/issues/1988",
    ),
    _script_case(
        "trainer-gradient-checkpointing-healthy",
        [],
        "import torch\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', torch_dtype=torch.float32)\n"
        "r = tok('the quick brown fox jumps over the lazy dog')['input_ids']\n"
        "data = [dict(input_ids=r, attention_mask=[1] * len(r), labels=r)] * 4\n"
        "args = TrainingArguments(output_dir='{work}/out', max_steps=2, per_device_train_batch_size=2, logging_steps=1,"
        " gradient_checkpointing=True, report_to=[], use_cpu=True, save_strategy='no')\n"
        "Trainer(model=model, args=args, train_dataset=data).train()\n",
        exit="ok",
        note="healthy: Trainer with gradient_checkpointing on CPU ('use_cache=True is incompatible with gradient"
        " checkpointing. Setting use_cache=False' and similar warnings only)",
    ),
    _script_case(
        "bf16-cpu-generate-healthy",
        [],
        "import torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', torch_dtype=torch.bfloat16, device_map='auto')\n"
        "ids = tok('hello there', return_tensors='pt').input_ids\n"
        "out = model.generate(ids, max_new_tokens=4, do_sample=False, temperature=0.7, top_p=0.9)\n"
        "print(tok.decode(out[0]))\n",
        exit="ok",
        note="healthy: bf16 weights with device_map='auto' on a CPU-only node and sampling flags with greedy decoding"
        " (warnings about ignored temperature/top_p only)",
    ),
]

# --- issue 26 (helper 2): renamed Trainer arguments, device_map limits, attention backends, padding -------------
CASES += [
    _script_case(
        "trainingargs-evaluation-strategy-removed",
        ["config.bad_argument"],
        "from transformers import TrainingArguments\n"
        "args = TrainingArguments(output_dir='{work}/out', evaluation_strategy='steps', report_to=[], use_cpu=True)\n",
        model=False,
        releases=("5.24.0", "5.25.0"),
        note="a pre-4.46 script passes evaluation_strategy (renamed eval_strategy, removed in 5.x); "
        "https://github.com/huggingface/transformers/issues/33851",
    ),
    _script_case(
        "trainer-tokenizer-kwarg-removed",
        ["config.bad_argument"],
        "from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny')\n"
        "args = TrainingArguments(output_dir='{work}/out', report_to=[], use_cpu=True)\n"
        "Trainer(model=model, args=args, tokenizer=tok)\n",
        releases=("5.24.0", "5.25.0"),
        note="Trainer(tokenizer=...) of a 4.x script on 5.x (processing_class since 4.46)",
    ),
    _script_case(
        "attn-implementation-unknown",
        ["config.bad_argument"],
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', attn_implementation='flash_attn_2')\n",
        releases=("5.24.0", "5.25.0"),
        note="attn_implementation with a value transformers does not know (flash_attn_2 for flash_attention_2); 4.46"
        " lets it through to a bare KeyError in the model class (not recorded: nothing stable to key on)",
    ),
    _script_case(
        "generate-right-padding-healthy",
        [],
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained('{work}/tiny')\n"
        "tok.pad_token = tok.pad_token or tok.eos_token\n"
        "tok.padding_side = 'right'\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny')\n"
        "batch = tok(['hi', 'hello there friend'], return_tensors='pt', padding=True)\n"
        "out = model.generate(input_ids=batch['input_ids'], attention_mask=batch['attention_mask'], max_new_tokens=3,"
        " do_sample=False)\n"
        "print(out.shape)\n",
        exit="ok",
        note="healthy: batched generate with right padding on a decoder-only model (the 'right-padding was detected'"
        " warning only)",
    ),
]

# --- issue 26 (helper 3): device_map values, offline revisions and partial caches, mismatched heads -----------
CASES += [
    _script_case(
        "device-map-unknown-strategy",
        ["config.bad_argument"],
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('{work}/tiny', device_map='balanced_gpu')\n",
        note="device_map with a strategy name from_pretrained does not know (it takes auto, balanced, balanced_low_0,"
        " sequential); https://github.com/huggingface/transformers/issues/22846",
    ),
    _script_case(
        "offline-revision-not-cached",
        ["download.incomplete"],
        "from transformers import AutoConfig\n"
        "print(AutoConfig.from_pretrained('tiny-org/tiny-model', revision='v2.0'))\n",
        model=False,
        env=OFFLINE_ENV,
        extra=HUB.CACHED,
        note="offline node whose cache holds main, while the script pins revision v2.0; "
        "https://github.com/huggingface/transformers/issues/24364",
    ),
    _script_case(
        "offline-weights-not-cached",
        ["download.incomplete"],
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('tiny-org/tiny-model')\n",
        model=False,
        env=OFFLINE_ENV,
        extra=HUB.CACHED,
        releases=("4.46.3",),
        note="offline node with a partial cache: config.json is cached, the weights never were (a cache copied"
        " after an interrupted download); 4.46 fails on the unresolved weights path (None.endswith); 5.x says only"
        " that the repo has no weight file, the words of a repo without weights, so it is not recorded there;"
        " https://github.com/huggingface/transformers/issues/30345",
    ),
    _script_case(
        "ignore-mismatched-sizes-healthy",
        [],
        "from transformers import AutoModelForSequenceClassification\n"
        "m = AutoModelForSequenceClassification.from_pretrained('{work}/tiny', num_labels=3)\n"
        "m.save_pretrained('{work}/cls3')\n"
        "m = AutoModelForSequenceClassification.from_pretrained('{work}/cls3', num_labels=5,"
        " ignore_mismatched_sizes=True)\n"
        "print(m.config.num_labels)\n",
        exit="ok",
        note="healthy: a 3-label classifier reloaded with 5 labels and ignore_mismatched_sizes=True (the 'newly"
        " initialized because the shapes did not match' warning is the point of the flag)",
    ),
    _script_case(
        "num-labels-mismatch",
        ["model.weights_mismatch"],
        "from transformers import AutoModelForSequenceClassification\n"
        "m = AutoModelForSequenceClassification.from_pretrained('{work}/tiny', num_labels=3)\n"
        "m.save_pretrained('{work}/cls3')\n"
        "m = AutoModelForSequenceClassification.from_pretrained('{work}/cls3', num_labels=5)\n",
        note="a fine-tuned 3-label classifier loaded with num_labels=5: the score head's shape does not match;"
        " https://github.com/huggingface/transformers/issues/14218",
    ),
]

PROGRAM = Program(
    name="transformers",
    releases=[
        # transformers first: its version names the program (program: transformers X)
        Release(label="4.46.3", requirements=["transformers==4.46.3", "torch==2.13.0", "accelerate==1.15.0"]),
        Release(label="5.24.0", requirements=["transformers==5.24.0", "torch==2.13.0", "accelerate==1.15.0"]),
        Release(label="5.25.0", requirements=["transformers==5.25.0", "torch==2.13.0", "accelerate==1.15.0"]),
    ],
    cases=CASES,
)
