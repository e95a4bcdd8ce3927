"""lm-evaluation-harness (``pip install "lm-eval[api,hf]"``: EleutherAI's evaluation, which users run on a model or
against their serving endpoint) as a user runs it: ``lm_eval --model hf --model_args pretrained=<dir> --tasks ...``
on the tiny random Qwen2 of ``make_tiny_qwen.py``, with a task of its own (a YAML under ``--include_path`` over a
local JSONL file: every case runs offline, no dataset is downloaded). Healthy: the task evaluated on the CPU (lm-eval
asks git for its commit outside any checkout and git answers "fatal: not a git repository", which a healthy log
must not be diagnosed by), and again with ``--limit`` and ``--log_samples`` into an output folder.

The failures of its issue tracker and of the PR threads that paste an lm-eval run: ``--model vllm`` / ``sglang``
without the engine installed, a task name the install has not, a model name the registry has not, a model path that
does not exist, ``parallelize=True`` on a CPU build of torch, a ``--model_args`` entry without ``=``, ``dtype=bf16``
(torch calls it bfloat16), ``--log_samples`` without ``--output_path``, the chat-completions model without
``--apply_chat_template``, ``--apply_chat_template`` on a tokenizer that has no chat template, a task whose dataset is
on the hub while the host is offline, and weights cut short.

One release, 0.4.13 (the newest: its ``lm-eval run`` CLI, with the old ``lm_eval --model ...`` form kept), over
the CPU torch of this machine; the ``after`` step removes PyPI's CUDA torchvision as elsewhere.

Not recorded: ``--device cuda:0`` on a host without CUDA (lm-eval logs "Cuda Available? False" and runs on the CPU:
slow, not failed), ``--batch_size abc`` (an int() ValueError inside the hf model's constructor, no sentence of
lm-eval's own), and ``local-completions`` against a port where no server listens (requests' "Connection refused":
the server the user meant to evaluate is down, a cause no class of the pack names).
"""

from case import BUILD_DAMAGED_TINY, DROP_TORCHVISION, OFFLINE_ENV, Case, Program, Release, tiny_files

ENV = {**OFFLINE_ENV, "HF_DATASETS_OFFLINE": "1", "HF_HOME": "{work}/hf-home", "CUDA_VISIBLE_DEVICES": ""}

# the user's own task: three questions in a local JSONL file, exact match on a short generation
TASK = """\
task: tiny_qa
dataset_path: json
dataset_kwargs:
  data_files:
    test: {work}/data.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{question}}"
doc_to_target: "{{answer}}"
generation_kwargs:
  max_gen_toks: 4
  until: ["\\n"]
metric_list:
  - metric: exact_match
"""
DATA = '{"question": "2+2=", "answer": "4"}\n{"question": "3+3=", "answer": "6"}\n{"question": "1+1=", "answer": "2"}\n'

RUN = "exec {bin}/lm_eval "
ON_TASK = " --tasks tiny_qa --include_path {work}/tasks --batch_size 1"


def _case(id: str, expect: list[str], note: str, args: str, *, damage: str = "", exit: str = "fail",
          build: bool = True) -> Case:
    """The tiny model built (and damaged) unless ``build`` is off, then ``lm_eval`` with ``args``."""
    files = {**tiny_files(damage), "tasks/tiny_qa.yaml": TASK, "data.jsonl": DATA}
    return Case(id=id, expect=expect, input="transformers", env=dict(ENV), note=note, timeout=420, exit=exit,
                files=files, argv=["bash", "-c", (BUILD_DAMAGED_TINY if build else "") + RUN + args])


def _hf(id: str, expect: list[str], note: str, model_args: str = "", extra: str = "", **kw) -> Case:
    """``--model hf`` on the tiny model (``model_args`` after its path) and the local task, then ``extra``."""
    return _case(id, expect, note, f"--model hf --model_args pretrained={{work}}/tiny{model_args}" + ON_TASK + extra,
                 **kw)


CASES = [
    _hf("hf-cpu-healthy", [], "healthy: the local task evaluated with --model hf on the CPU; lm-eval's git probe "
        "prints 'fatal: not a git repository' outside a checkout", exit="ok"),
    _hf("limit-log-samples-healthy", [], "healthy: --limit 2 (lm-eval warns it is for testing only) with "
        "--log_samples into --output_path", extra=" --limit 2 --log_samples --output_path {work}/out", exit="ok"),
    _case("vllm-not-installed", ["runtime.backend_mismatch"],
          "--model vllm where vLLM is not installed in lm-eval's environment (lm-eval[vllm] not installed)",
          "--model vllm --model_args pretrained={work}/tiny" + ON_TASK),
    _case("sglang-not-installed", ["runtime.backend_mismatch"],
          "--model sglang where SGLang is not installed: lm-eval's own ModuleNotFoundError",
          "--model sglang --model_args pretrained={work}/tiny" + ON_TASK),
    _hf("task-unknown", ["config.bad_argument"], "--tasks with a name no task of the install (or --include_path) has",
        extra=" --tasks tiny_qaa"),
    _case("model-name-unknown", ["config.bad_argument"], "--model with a name lm-eval's registry does not have",
          "--model vllm-vlm2 --model_args pretrained={work}/tiny" + ON_TASK),
    _case("model-path-missing", ["config.bad_argument"],
          "pretrained= a local path that does not exist: the hub refuses it as a repo id",
          "--model hf --model_args pretrained=/models/qwen2.5-7b-instruct" + ON_TASK, build=False),
    _hf("parallelize-cpu-torch", ["runtime.backend_mismatch"],
        "model_args parallelize=True (spread the model over the GPUs) with a CPU build of torch",
        model_args=",parallelize=True"),
    _case("model-args-malformed", ["config.bad_argument"], "--model_args pretrained without '=': the CLI refuses it",
          "--model hf --model_args pretrained" + ON_TASK),
    _hf("dtype-shorthand", ["config.bad_argument"], "model_args dtype=bf16: torch calls it bfloat16",
        model_args=",dtype=bf16"),
    _hf("log-samples-without-output", ["config.bad_argument"], "--log_samples without --output_path",
        extra=" --log_samples"),
    _case("chat-completions-no-template-flag", ["config.bad_argument"],
          "--model local-chat-completions without --apply_chat_template: lm-eval refuses the plain prompts before "
          "any request", "--model local-chat-completions --model_args "
          "model=tiny,base_url=http://127.0.0.1:9/v1/chat/completions" + ON_TASK, build=False),
    _hf("chat-template-missing", ["config.bad_argument"],
        "--apply_chat_template on a tokenizer that has no chat template", extra=" --apply_chat_template",
        damage="(M / 'chat_template.jinja').unlink(missing_ok=True)\n"
               "c = json.loads((M / 'tokenizer_config.json').read_text())\nc.pop('chat_template', None)\n"
               "(M / 'tokenizer_config.json').write_text(json.dumps(c))"),
    _case("hub-task-offline", ["download.incomplete"],
          "--tasks gsm8k (its dataset is on the hub) on an offline host with an empty cache",
          "--model hf --model_args pretrained={work}/tiny --tasks gsm8k --limit 2 --batch_size 1"),
    _hf("weights-truncated", ["model.shard_corrupt"], "model.safetensors cut short (a copy that stopped part-way)",
        damage="p = M / 'model.safetensors'\np.write_bytes(p.read_bytes()[:30000])"),
]

PROGRAM = Program(
    name="lmeval",
    releases=[Release(label="0.4.13", requirements=["torch==2.13.0", "lm-eval[api,hf]==0.4.13"],
                      after=DROP_TORCHVISION)],
    cases=CASES,
    dist="lm_eval",
)
