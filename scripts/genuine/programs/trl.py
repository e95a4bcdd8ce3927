"""TRL (SFTTrainer, DPOTrainer, GRPOTrainer, RewardTrainer) as fine-tuning scripts use it: data sets in another
layout than the trainer reads, tokenizers without a chat template or pad token, arguments another release renamed,
configs the trainer or the machine refuses, checkpoints to resume that are missing or damaged, two gloo ranks out
of step, a host without room for DPO's reference copy. Every model is the tiny random Qwen2 that
``scripts/make_tiny_qwen.py`` writes inside the case (no downloads, HF_HUB_OFFLINE=1), every data set a few rows
built in memory by the case's own script.

Releases: 0.14.0, the oldest with today's API shape (processing_class, SFTConfig) and GRPO, beside transformers
4.46.3; and the newest on the index with transformers 5. torch is the local CPU wheel (``torch==2.13.0``).
"""

from dataclasses import replace

from case import BUILD_TINY, MAKE_TINY, OFFLINE_ENV, Case, Program, Release

# What every script starts with: the tiny model and its tokenizer, loaded in float32 on either transformers line.
COMMON = """\
import json, os, sys
import torch
import transformers
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.manual_seed(0)
TINY = "{work}/tiny"
_DT = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


def tok():
    t = AutoTokenizer.from_pretrained(TINY)
    t.model_input_names = ["input_ids", "attention_mask"]  # as Qwen's own tokenizer: no token_type_ids
    return t


def lm():
    return AutoModelForCausalLM.from_pretrained(TINY, **{_DT: torch.float32})


TEXTS = ["the quick brown fox jumps over the lazy dog", "hello world , how are you today ?",
         "the server starts loading model weights", "vLLM serves an OpenAI compatible API"] * 4
QUIET = dict(report_to="none", logging_steps=1, save_strategy="no", use_cpu=True, disable_tqdm=True)
SHORT = dict(max_steps=2, per_device_train_batch_size=2)
"""


def _case(id: str, expect: list[str], body: str, *, note: str, exit: str = "fail", env: dict | None = None,
          extra: dict | None = None, argv: str | None = None, releases: tuple[str, ...] | None = None,
          expect_by: dict | None = None, timeout: float = 300.0, also: list[str] | None = None) -> Case:
    """Build the tiny model, then run ``train.py`` (COMMON + body) with the venv python, or ``argv`` (bash)."""
    files: dict[str, str | bytes] = {"make_tiny_qwen.py": MAKE_TINY, "train.py": COMMON + "\n" + body}
    files.update(extra or {})
    return Case(
        id=id,
        expect=expect,
        argv=["bash", "-c", BUILD_TINY + (argv or "exec {python} train.py")],
        files=files,
        env={**OFFLINE_ENV, **(env or {})},
        input="transformers",
        note=note,
        exit=exit,
        timeout=timeout,
        releases=releases,
        expect_by=dict(expect_by or {}),
        also=list(also or []),
    )


OLD, NEW = "0.14.0", "1.16.0"

SFT = "from trl import SFTConfig, SFTTrainer\n"
DPO = "from trl import DPOConfig, DPOTrainer\n"
GRPO = "from trl import GRPOConfig, GRPOTrainer\n"
REWARD = "from trl import RewardConfig, RewardTrainer\nfrom transformers import AutoModelForSequenceClassification\n"
PAIRS = (
    "PAIRS = Dataset.from_dict({'prompt': ['hello world ,', 'the quick brown'] * 4,"
    " 'chosen': [' how are you today ?', ' fox jumps over the lazy dog'] * 4,"
    " 'rejected': [' 0 1 2 3', ' port host health'] * 4})\n"
)
PROMPTS = "PROMPTS = Dataset.from_dict({'prompt': ['hello world ,', 'the quick brown', 'the server', 'vLLM serves'] * 2})\n"
LENGTH_REWARD = "def reward_len(completions, **kwargs):\n    return [-abs(8 - len(c)) / 8.0 for c in completions]\n"

# accelerate launch with two CPU ranks (gloo) on 127.0.0.1
LAUNCH2 = (
    "exec {bin}/accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no"
    " --dynamo_backend no --main_process_port {port} train.py"
)

CASES = [
    # --- healthy runs with their usual warnings -------------------------------------------------------------------
    _case(
        "sft-train-healthy",
        [],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', max_steps=2, per_device_train_batch_size=2, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="healthy: two SFT steps on a plain-text data set",
        exit="ok",
    ),
    _case(
        "sft-packing-messages-healthy",
        [],
        SFT + "msgs = [[{'role': 'user', 'content': t}, {'role': 'assistant', 'content': t[::-1]}] for t in TEXTS]\n"
        "data = Dataset.from_dict({'messages': msgs})\n"
        "args = SFTConfig(output_dir='out', max_steps=2, per_device_train_batch_size=2, packing=True, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="healthy: conversational SFT with packing on the default attention (no flash-attn installed, so packed"
        " samples may attend to each other: a quality concern, not a failure)",
        exit="ok",
    ),
    _case(
        "dpo-train-healthy",
        [],
        DPO + PAIRS + "args = DPOConfig(output_dir='out', max_length=64, **SHORT, **QUIET)\n"
        "DPOTrainer(model=lm(), args=args, train_dataset=PAIRS, processing_class=tok()).train()\n",
        note="healthy: two DPO steps (the reference model is a frozen copy of the policy)",
        exit="ok",
    ),
    _case(
        "grpo-train-healthy",
        [],
        GRPO + PROMPTS + LENGTH_REWARD + "args = GRPOConfig(output_dir='out', num_generations=2,"
        " max_completion_length=8, **SHORT, **QUIET)\n"
        "GRPOTrainer(model=lm(), reward_funcs=reward_len, args=args, train_dataset=PROMPTS,"
        " processing_class=tok()).train()\n",
        note="healthy: two GRPO steps, two generations per prompt, a length reward",
        exit="ok",
    ),
    _case(
        "reward-train-healthy",
        [],
        REWARD + PAIRS + "m = AutoModelForSequenceClassification.from_pretrained(TINY, num_labels=1, **{_DT: torch.float32})\n"
        "t = tok()\nm.config.pad_token_id = t.pad_token_id\n"
        "args = RewardConfig(output_dir='out', max_length=64, **SHORT, **QUIET)\n"
        "RewardTrainer(model=m, args=args, train_dataset=PAIRS, processing_class=t).train()\n",
        note="healthy: a reward model (score head newly initialised, as it must be) trained two steps on pairs",
        exit="ok",
    ),
    # --- data sets without what the trainer needs ------------------------------------------------------------------
    _case(
        "sft-text-field-missing",
        ["config.bad_argument"],
        SFT + "data = Dataset.from_dict({'instruction': TEXTS, 'output': TEXTS[::-1]})\n"
        "args = SFTConfig(output_dir='out', **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="an instruction/output data set given to SFTTrainer, which looks for a `text` (or `messages`/`prompt`)"
        " column",
    ),
    _case(
        "dpo-chosen-rejected-missing",
        ["config.bad_argument"],
        DPO + "data = Dataset.from_dict({'prompt': TEXTS, 'response': TEXTS[::-1]})\n"
        "args = DPOConfig(output_dir='out', max_length=64, **SHORT, **QUIET)\n"
        "DPOTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="a prompt/response (SFT-style) data set given to DPOTrainer, which needs `chosen` and `rejected`",
    ),
    _case(
        "grpo-prompt-column-missing",
        ["config.bad_argument"],
        GRPO + LENGTH_REWARD + "data = Dataset.from_dict({'question': TEXTS[:8]})\n"
        "args = GRPOConfig(output_dir='out', num_generations=2, max_completion_length=8, **SHORT, **QUIET)\n"
        "GRPOTrainer(model=lm(), reward_funcs=reward_len, args=args, train_dataset=data,"
        " processing_class=tok()).train()\n",
        note="a GRPO data set whose prompts are in a `question` column, not `prompt`",
    ),
    _case(
        "sft-chat-template-missing",
        ["config.bad_argument"],
        SFT + "msgs = [[{'role': 'user', 'content': t}, {'role': 'assistant', 'content': t[::-1]}] for t in TEXTS]\n"
        "data = Dataset.from_dict({'messages': msgs})\nt = tok()\nt.chat_template = None\n"
        "args = SFTConfig(output_dir='out', **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=t).train()\n",
        note="a conversational (`messages`) data set with a base-model tokenizer that has no chat template",
    ),
    _case(
        "reward-pad-token-missing",
        ["config.bad_argument"],
        REWARD + PAIRS + "m = AutoModelForSequenceClassification.from_pretrained(TINY, num_labels=1, **{_DT: torch.float32})\n"
        "t = tok()\nt.pad_token = None\nm.config.pad_token_id = None\n"
        "args = RewardConfig(output_dir='out', max_length=64, **SHORT, **QUIET)\n"
        "RewardTrainer(model=m, args=args, train_dataset=PAIRS, processing_class=t).train()\n",
        note="a reward model whose tokenizer (and config) has no pad token, as base Llama tokenizers ship; TRL 1.x"
        " pads with its own collator and trains",
        exit="any",
        expect_by={NEW: []},
    ),
    _case(
        "reward-num-labels-two",
        ["config.bad_argument"],
        REWARD + PAIRS + "m = AutoModelForSequenceClassification.from_pretrained(TINY, num_labels=2, **{_DT: torch.float32})\n"
        "t = tok()\nm.config.pad_token_id = t.pad_token_id\n"
        "args = RewardConfig(output_dir='out', max_length=64, **SHORT, **QUIET)\n"
        "RewardTrainer(model=m, args=args, train_dataset=PAIRS, processing_class=t).train()\n",
        note="a reward model built with num_labels=2 (a classifier head) instead of one scalar score; TRL 0.14 trains"
        " it without a word",
        exit="any",
        expect_by={OLD: []},
    ),
    # --- scripts written for another release ---------------------------------------------------------------------
    _case(
        "sftconfig-max-seq-length-removed",
        ["config.bad_argument"],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', max_seq_length=128, **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="SFTConfig(max_seq_length=...) from a pre-0.20 tutorial: the argument is max_length now",
        releases=(NEW,),
    ),
    _case(
        "sftconfig-max-length-too-new",
        ["config.bad_argument"],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', max_length=128, **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="a script written for a current TRL (SFTConfig(max_length=...)) run on an older release that calls it"
        " max_seq_length",
        releases=(OLD,),
    ),
    _case(
        "dpotrainer-tokenizer-kwarg",
        ["config.bad_argument"],
        DPO + PAIRS + "args = DPOConfig(output_dir='out', max_length=64, **SHORT, **QUIET)\n"
        "DPOTrainer(model=lm(), args=args, train_dataset=PAIRS, tokenizer=tok()).train()\n",
        note="DPOTrainer(tokenizer=...) from an old example: the argument is processing_class since TRL 0.12; 0.14"
        " still takes it",
        exit="any",
        expect_by={OLD: []},
    ),
    # --- configurations the trainer refuses ----------------------------------------------------------------------
    _case(
        "grpo-generations-indivisible",
        ["config.bad_argument"],
        GRPO + PROMPTS + LENGTH_REWARD + "args = GRPOConfig(output_dir='out', per_device_train_batch_size=3,"
        " num_generations=2, max_completion_length=8, max_steps=2, **QUIET)\n"
        "GRPOTrainer(model=lm(), reward_funcs=reward_len, args=args, train_dataset=PROMPTS,"
        " processing_class=tok()).train()\n",
        note="GRPO with a batch of 3 completions per device and 2 generations per prompt: groups do not fit"
        " (TRL 0.14 counted prompts per device and had no such check)",
        releases=(NEW,),
    ),
    _case(
        "grpo-use-vllm-not-installed",
        ["runtime.backend_mismatch"],
        GRPO + PROMPTS + LENGTH_REWARD + "args = GRPOConfig(output_dir='out', num_generations=2,"
        " max_completion_length=8, use_vllm=True, **SHORT, **QUIET)\n"
        "GRPOTrainer(model=lm(), reward_funcs=reward_len, args=args, train_dataset=PROMPTS,"
        " processing_class=tok()).train()\n",
        note="GRPOConfig(use_vllm=True) in an environment without vLLM",
    ),
    _case(
        "sft-peft-target-modules-absent",
        ["config.bad_argument"],
        SFT + "from peft import LoraConfig\ndata = Dataset.from_dict({'text': TEXTS})\n"
        "lora = LoraConfig(r=4, target_modules=['query_key_value', 'dense_h_to_4h'], task_type='CAUSAL_LM')\n"
        "args = SFTConfig(output_dir='out', **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok(), peft_config=lora).train()\n",
        note="SFTTrainer(peft_config=...) with Falcon/GPT-NeoX target_modules on a Qwen2 model",
    ),
    _case(
        "sft-fp16-on-cpu-healthy",
        [],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', fp16=True, **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="healthy: SFTConfig(fp16=True) on a machine whose torch sees no GPU; transformers of old refused it"
        " ('can only be used on CUDA devices'), these releases train with CPU autocast",
        exit="ok",
    ),
    _case(
        "sft-default-bf16-no-gpu",
        ["config.dtype_unsupported"],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', report_to='none', logging_steps=1, save_strategy='no', disable_tqdm=True,"
        " **SHORT)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="an SFT script without precision flags on a node whose torch sees no GPU: TRL 1.x's SFTConfig turns bf16"
        " on by default and transformers refuses bf16 without a GPU unless use_cpu is set (TRL 0.14 trains in fp32)",
        exit="any",
        expect_by={OLD: []},
    ),
    _case(
        "sft-gradient-checkpointing-unsupported",
        ["config.bad_argument"],
        SFT + "from torch import nn\nfrom transformers import PretrainedConfig, PreTrainedModel\n"
        "from transformers import GenerationConfig\nfrom transformers.modeling_outputs import CausalLMOutput\n"
        "class TinyRNNConfig(PretrainedConfig):\n    model_type = 'tinyrnn'\n"
        "class TinyRNNForCausalLM(PreTrainedModel):\n"
        "    config_class = TinyRNNConfig\n"
        "    def __init__(self, config):\n"
        "        super().__init__(config)\n"
        "        self.emb = nn.Embedding(512, 32)\n        self.rnn = nn.GRU(32, 32, batch_first=True)\n"
        "        self.head = nn.Linear(32, 512)\n        self.post_init()\n"
        "        self.generation_config = GenerationConfig()\n"
        "    def _init_weights(self, module):\n        pass\n"
        "    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):\n"
        "        logits = self.head(self.rnn(self.emb(input_ids))[0])\n"
        "        loss = None if labels is None else nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 512),"
        " labels[:, 1:].reshape(-1), ignore_index=-100)\n"
        "        return CausalLMOutput(loss=loss, logits=logits)\n"
        "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', gradient_checkpointing=True, **SHORT, **QUIET)\n"
        "SFTTrainer(model=TinyRNNForCausalLM(TinyRNNConfig()), args=args, train_dataset=data,"
        " processing_class=tok()).train()\n",
        note="gradient_checkpointing=True with a custom-code model class that does not support it",
    ),
    _case(
        "sft-output-dir-not-writable",
        ["config.bad_argument"],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='shared/qwen-sft', **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        # a directory the user may not write into (root without CAP_DAC_OVERRIDE stands in for another user)
        argv="mkdir -p shared && chmod 555 shared && exec setpriv --inh-caps=-dac_override,-dac_read_search"
        " --bounding-set=-dac_override,-dac_read_search {python} train.py",
        note="output_dir under a directory the training user may not write (a container's working directory owned"
        " by another user)",
    ),
    _case(
        "sft-deepspeed-not-installed",
        ["runtime.backend_mismatch"],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', deepspeed='ds_zero3.json', **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="SFTConfig(deepspeed='ds_zero3.json') in an environment without DeepSpeed: transformers checks for the"
        " package before it reads the config file",
    ),
    # --- checkpoints --------------------------------------------------------------------------------------------
    _case(
        "sft-resume-no-checkpoint",
        ["config.bad_argument"],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\nos.makedirs('out', exist_ok=True)\n"
        "args = SFTConfig(output_dir='out', **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok())"
        ".train(resume_from_checkpoint=True)\n",
        note="train(resume_from_checkpoint=True) in an output_dir that holds no checkpoint-N folder (the first run"
        " of a job script written for restarts)",
    ),
    _case(
        "sft-resume-checkpoint-truncated",
        ["model.shard_corrupt"],
        SFT + "import pathlib\ndata = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', max_steps=1, per_device_train_batch_size=2, report_to='none',"
        " save_steps=1, use_cpu=True, disable_tqdm=True)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n"
        "p = pathlib.Path('out/checkpoint-1/model.safetensors')\nb = p.read_bytes()\np.write_bytes(b[: len(b) // 3])\n"
        "print('--- resuming', flush=True)\n"
        "args = SFTConfig(output_dir='out', **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok())"
        ".train(resume_from_checkpoint='out/checkpoint-1')\n",
        note="resume from a checkpoint whose model.safetensors was cut short (the job was killed while saving)",
    ),
    # --- several processes, memory --------------------------------------------------------------------------------
    _case(
        "accelerate-ranks-uneven-data",
        ["nccl.timeout"],
        SFT + "import trl\nrank = int(os.environ.get('RANK', '0'))\n"
        # DDP on CPU: transformers 5 needs use_cpu for it; 4.46 only applies ddp_timeout to the gloo group without it
        "cpu = int(trl.__version__.split('.')[0]) >= 1\n"
        "data = Dataset.from_dict({'text': TEXTS if rank == 0 else TEXTS[:4]})\n"
        "args = SFTConfig(output_dir='out', num_train_epochs=1, per_device_train_batch_size=2, ddp_timeout=15,"
        " bf16=False, use_cpu=cpu, report_to='none', logging_steps=1, save_strategy='no', disable_tqdm=True)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        argv=LAUNCH2,
        note="accelerate launch with two CPU (gloo) ranks whose data sets differ in length: the short rank leaves"
        " the loop early, and the other waits in a collective until gloo's timeout (0.14: its all_gather times out)"
        " or finds the peer gone (1.x: 'Connection closed by peer')",
        timeout=240,
    ),
    _case(
        "dpo-ref-copy-host-oom",
        ["memory.host_oom"],
        DPO + PAIRS + "import resource\nfrom transformers import Qwen2Config, Qwen2ForCausalLM\n"
        "Qwen2ForCausalLM(Qwen2Config(vocab_size=512, hidden_size=512, intermediate_size=2048, num_hidden_layers=8,"
        " num_attention_heads=8, num_key_value_heads=8)).save_pretrained('policy')\n"
        "big = AutoModelForCausalLM.from_pretrained('policy', **{_DT: torch.float32})\n"
        "size = sum(p.numel() * p.element_size() for p in big.parameters())\n"
        "vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize')][0].split()[1]) * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + size // 2, vm + size // 2))\n"
        "args = DPOConfig(output_dir='out', max_length=64, **SHORT, **QUIET)\n"
        "DPOTrainer(model=big, args=args, train_dataset=PAIRS, processing_class=tok()).train()\n",
        note="DPO without a ref_model builds a second copy of the policy for the reference (0.14 copies it, 1.x loads"
        " it again): a host with room for one copy of the weights (an address-space limit here) runs out of memory",
    ),
]

# One public thread per case where users report the scenario (cited in its note).
# --- issue 26 (helper 2) ---------------------------------------------------------------------------------------
CASES += [
    _case(
        "sft-eval-strategy-no-eval-dataset",
        ["config.bad_argument"],
        SFT + "data = Dataset.from_dict({'text': TEXTS})\n"
        "args = SFTConfig(output_dir='out', eval_strategy='steps', eval_steps=1, **SHORT, **QUIET)\n"
        "SFTTrainer(model=lm(), args=args, train_dataset=data, processing_class=tok()).train()\n",
        note="eval_strategy='steps' (from a recipe) with no eval_dataset passed to the trainer",
    ),
]

THREADS = {
    "sft-train-healthy": "https://github.com/huggingface/alignment-handbook/issues/32",
    "sft-packing-messages-healthy": "https://github.com/huggingface/trl/issues/1230",
    "dpo-train-healthy": "https://github.com/huggingface/trl/issues/2569",
    "grpo-train-healthy": "https://github.com/huggingface/trl/issues/2625",
    "reward-train-healthy": "https://github.com/huggingface/trl/issues/1379",
    "sft-text-field-missing": "https://github.com/huggingface/open-r1/issues/454",
    "sft-eval-strategy-no-eval-dataset": "https://github.com/QwenLM/Qwen3-VL/issues/1936",
    "dpo-chosen-rejected-missing": "https://github.com/rui-ye/OpenFedLLM/issues/39",
    "grpo-prompt-column-missing": "https://github.com/modelscope/ms-swift/issues/5087",
    "sft-chat-template-missing": "https://github.com/huggingface/open-r1/issues/85",
    "reward-pad-token-missing": "https://github.com/huggingface/trl/issues/422",
    "reward-num-labels-two": "https://github.com/huggingface/trl/pull/5087",
    "sftconfig-max-seq-length-removed": "https://github.com/unslothai/unsloth/issues/10785",
    "sftconfig-max-length-too-new": "https://github.com/huggingface/trl/issues/2226",
    "dpotrainer-tokenizer-kwarg": "https://github.com/huggingface/trl/pull/2162",
    "grpo-generations-indivisible": "https://github.com/huggingface/open-r1/issues/249",
    "grpo-use-vllm-not-installed": "https://github.com/huggingface/trl/pull/2600",
    "sft-peft-target-modules-absent": "https://github.com/Stability-AI/StableLM/issues/98",
    "sft-fp16-on-cpu-healthy": "https://github.com/yangjianxin1/CLIP-Chinese/issues/4",
    "sft-default-bf16-no-gpu": "https://github.com/gensyn-ai/rl-swarm/issues/396",
    "sft-gradient-checkpointing-unsupported": "https://github.com/hiyouga/LlamaFactory/issues/1550",
    "sft-output-dir-not-writable": "https://github.com/huggingface/trl/issues/3872",
    "sft-deepspeed-not-installed": "https://github.com/mallorbc/Finetune_LLMs/issues/3",
    "sft-resume-no-checkpoint": "https://github.com/huggingface/transformers/issues/15341",
    "sft-resume-checkpoint-truncated": "https://github.com/bghira/SimpleTuner/issues/2613",
    "accelerate-ranks-uneven-data": "https://github.com/microsoft/PyMarlin/issues/80",
    "dpo-ref-copy-host-oom": "https://github.com/hiyouga/LlamaFactory/issues/798",
}
CASES = [replace(c, note=f"{c.note}; {THREADS[c.id]}") for c in CASES]

PROGRAM = Program(
    name="trl",
    dist="trl",
    releases=[
        Release(label=OLD, requirements=[f"trl=={OLD}", "transformers==4.46.3", "torch==2.13.0", "accelerate==1.1.1",
                                         "datasets==3.1.0", "peft==0.13.2"]),
        Release(label=NEW, requirements=[f"trl=={NEW}", "transformers==5.24.0", "torch==2.13.0", "accelerate==1.15.0",
                                         "datasets==5.2.0", "peft==0.21.2"]),
    ],
    cases=CASES,
)
