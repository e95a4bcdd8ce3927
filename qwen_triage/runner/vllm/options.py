"""vLLM's option tables: which flags take values, their aliases, their types.

Which options are boolean, and which take several values, is not visible in an
argv, so the parser needs vLLM's own table. Where vLLM is installed the probe
(``probe.py``) reads it from vLLM's parser in the launch's interpreter; the
tables written out below are vLLM 0.32.0's (plus a few boolean flags of older
releases) and serve as the fallback. An option in no table is taken to carry
one value when the next token is not an option, and to be a bare flag
otherwise.

:class:`OptionTable` is the one shape both come in; the module-level
functions use the built-in table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

VLLM_ARGS_VERSION = "0.32.0"

Takes = Literal["none", "one", "multi", "optional", "unknown"]

# --- vLLM 0.32.0's option tables (from its own parser) ------------------------------

# Flags that take no value (argparse nargs=0). The BooleanOptionalAction ones also
# accept --no-NAME; store_true ones (--headless, --disable-log-stats…) do not, but
# treating --no-NAME as a bare flag for them is harmless.
BOOL_FLAGS: frozenset[str] = frozenset(
    """
    --aggregate-engine-logging --allow-credentials --allow-deprecated-quantization
    --async-scheduling --cohere-is-reasoning-model --cudagraph-metrics
    --data-parallel-external-lb --data-parallel-hybrid-lb
    --data-parallel-multi-port-external-lb --dcp-q-replicate --disable-cascade-attn
    --disable-chunked-mm-input --disable-custom-all-reduce --disable-fastapi-docs
    --disable-hybrid-kv-cache-manager --disable-log-stats
    --disable-nccl-for-dp-synchronization --disable-sliding-window
    --disable-uvicorn-access-log --enable-auto-tool-choice
    --enable-batch-sharded-sampling --enable-chunked-prefill --enable-cumem-allocator
    --enable-dbo --enable-elastic-ep --enable-ep-weight-filter --enable-eplb
    --enable-expert-parallel --enable-fault-tolerance --enable-flash-late-interaction
    --enable-flashinfer-autotune --enable-force-include-usage --enable-hc-sp
    --enable-layerwise-nvtx-tracing --enable-log-deltas --enable-log-outputs
    --enable-log-requests --enable-logging-iteration-details --enable-lora
    --enable-mamba-cache-stochastic-rounding --enable-mamba-shared-prefix-checkpoint
    --enable-mfu-metrics --enable-mixed-moe-lora-format --enable-mm-embeds
    --enable-moe-shared-loras --enable-nccl-comm-suspend --enable-offline-docs
    --enable-per-request-metrics --enable-prefix-caching --enable-prompt-embeds
    --enable-prompt-tokens-details --enable-request-id-headers
    --enable-return-routed-experts --enable-scale-out --enable-server-load-tracking
    --enable-shm-tensor-arena --enable-sleep-mode --enable-ssl-refresh
    --enable-tokenizer-info-endpoint --enable-tower-connector-lora
    --enable-trace-replay --enforce-eager --exclude-tools-when-tool-choice-none
    --fail-on-environ-validation --fully-sharded-loras --grpc --headless
    --interleave-mm-strings --jit-monitor-verbose --kv-cache-metrics
    --kv-sharing-fast-prefill --language-model-only --log-error-stack
    --long-prefill-token-threshold-adaptive --mm-device-do-normalize
    --mm-encoder-only --numa-bind --ray-workers-use-nsight --return-sampling-mask
    --return-tokens-as-token-ids --scheduler-reserve-full-isl --skip-mm-profiling
    --skip-tokenizer-init --sleep-mode-offload-cudagraph --specialize-active-lora
    --swa-bounded-replay --tokens-only --trust-remote-code
    --trust-request-chat-template --trust-request-mm-kwargs --use-fp64-gumbel
    --use-replayssm --use-tqdm-on-load
    --disable-log-requests --disable-frontend-multiprocessing --enable-reasoning
    --worker-use-ray --use-v2-block-manager --disable-async-output-proc
    --disable-mm-preprocessor-cache --enable-prompt-adapter --enable-lora-bias
    """.split()
)

# Flags that take one or more values (nargs='+').
MULTI_FLAGS: frozenset[str] = frozenset(
    """
    --allowed-media-domains --api-key --collect-detailed-traces --cpu-offload-params
    --cudagraph-capture-sizes --ignore-patterns --kv-cache-dtype-skip-layers
    --logits-processors --lora-modules --lora-target-modules --numa-bind-cpus
    --numa-bind-nodes --offload-params --served-model-name
    --sleep-preserve-parameter-names
    """.split()
)

# Flags whose value is optional (nargs='?').
OPTIONAL_VALUE_FLAGS: frozenset[str] = frozenset({"--hf-token"})

# Flags that may be given several times, each adding a value (action='append').
APPEND_FLAGS: frozenset[str] = frozenset({"--middleware"})

SHORT_ALIASES: Mapping[str, str] = {
    "-asc": "--api-server-count",
    "-q": "--quantization",
    "-pp": "--pipeline-parallel-size",
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-tp": "--tensor-parallel-size",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpn": "--data-parallel-rank",
    "-dpr": "--data-parallel-start-rank",
    "-dpl": "--data-parallel-size-local",
    "-dpa": "--data-parallel-address",
    "-dpp": "--data-parallel-rpc-port",
    "-dpb": "--data-parallel-backend",
    "-dph": "--data-parallel-hybrid-lb",
    "-dpe": "--data-parallel-external-lb",
    "-dpm": "--data-parallel-multi-port-external-lb",
    "-ep": "--enable-expert-parallel",
    "-sc": "--speculative-config",
    "-dc": "--diffusion-config",
    "-cc": "--compilation-config",
    "-ac": "--attention-config",
    "-O": "--optimization-level",
}

# Common value-taking options, so that a value that looks odd is still taken as one.
ONE_VALUE_HINTS = frozenset(
    """
    --model --tokenizer --served-model-name --revision --tokenizer-revision --download-dir
    --load-format --kv-cache-dtype --seed --swap-space --cpu-offload-gb --block-size
    --max-num-seqs --max-num-batched-tokens --quantization --chat-template --uvicorn-log-level
    --root-path --ssl-keyfile --ssl-certfile --distributed-executor-backend --config
    --kv-cache-memory-bytes --generation-config --tool-call-parser --reasoning-parser
    --limit-mm-per-prompt --hf-overrides --override-generation-config --compilation-config
    --speculative-config --kv-transfer-config --max-logprobs --runner --convert --task
    --tokenizer-mode --max-loras --max-lora-rank --optimization-level --api-server-count
    --data-parallel-size-local --data-parallel-address --data-parallel-rpc-port
    --data-parallel-backend --data-parallel-rank --data-parallel-start-rank --nnodes
    --node-rank --master-addr --master-port --rope-scaling --rope-theta --max-seq-len-to-capture
    --num-gpu-blocks-override --scheduling-policy --log-config-file --middleware
    """.split()
)

# The options with a typed view on VllmLaunch (field -> flag), and the type of each.
TYPED_OPTIONS: Mapping[str, str] = {
    "host": "--host",
    "port": "--port",
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "max_model_len": "--max-model-len",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "dtype": "--dtype",
    "enforce_eager": "--enforce-eager",
    "disable_custom_all_reduce": "--disable-custom-all-reduce",
}
TYPED_KINDS: Mapping[str, Literal["str", "int", "float", "human_int", "bool"]] = {
    "host": "str",
    "port": "int",
    "tensor_parallel_size": "int",
    "pipeline_parallel_size": "int",
    "data_parallel_size": "int",
    "max_model_len": "human_int",
    "gpu_memory_utilization": "float",
    "dtype": "str",
    "enforce_eager": "bool",
    "disable_custom_all_reduce": "bool",
}
MODEL_NAMES = frozenset({"--model", "<model>"})

# Aliases FlexibleArgumentParser itself rewrites, so they are in no option's flags.
PARSER_ALIASES: Mapping[str, str] = {"-O": "--optimization-level"}
TYPED_NAMES = frozenset(TYPED_OPTIONS.values()) | MODEL_NAMES

_NEG_NUMBER = re.compile(r"^-\d|^-\.\d")


def is_option(tok: str) -> bool:
    """A token that starts an option (``-5`` and ``-.5`` are values, ``-`` is a positional)."""
    return tok.startswith("-") and tok != "-" and not _NEG_NUMBER.match(tok)


# --- the table ----------------------------------------------------------------------


class OptionSpec(BaseModel):
    """One option of vLLM's parser, as the probe reports it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    flags: tuple[str, ...] = Field(description="every spelling: ('--tensor-parallel-size', '-tp')")
    dest: str
    takes: Literal["none", "one", "multi", "optional"]
    append: bool = Field(default=False, description="given several times, each adds a value")
    negatable: bool = Field(default=False, description="--no-NAME is accepted")
    choices: tuple[str, ...] | None = None
    default: Any = Field(default=None, description="vLLM's default, as JSON")


class OptionTable(BaseModel):
    """What the parser needs to know of vLLM's options: arity, aliases, negation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="'built-in' or 'probed: <interpreter>'")
    vllm_version: str
    bool_flags: frozenset[str]
    multi_flags: frozenset[str]
    optional_value_flags: frozenset[str]
    append_flags: frozenset[str]
    one_value_flags: frozenset[str] = Field(description="known to take exactly one value")
    aliases: dict[str, str] = Field(description="short flag -> canonical long flag")
    options: tuple[OptionSpec, ...] = Field(default=(), description="the full table, when probed")

    @classmethod
    def from_specs(cls, specs: Iterable[OptionSpec], *, vllm_version: str, source: str) -> OptionTable:
        specs = tuple(specs)
        by_takes: dict[str, set[str]] = {"none": set(), "one": set(), "multi": set(), "optional": set()}
        append: set[str] = set()
        aliases: dict[str, str] = {}
        for s in specs:
            longs = [f for f in s.flags if f.startswith("--") and not (s.negatable and f.startswith("--no-"))]
            if not longs:
                continue
            name = canonical_long(longs[0])
            for f in s.flags:
                if f.startswith("--"):
                    if not (s.negatable and f.startswith("--no-")):
                        by_takes[s.takes].add(canonical_long(f))
                elif f.startswith("-"):
                    aliases[f] = name
            if s.append:
                append.update(canonical_long(f) for f in longs)
        known = set().union(*by_takes.values())
        for short, long in PARSER_ALIASES.items():
            if long in known:
                aliases.setdefault(short, long)
        return cls(
            source=source,
            vllm_version=vllm_version,
            bool_flags=frozenset(by_takes["none"]),
            multi_flags=frozenset(by_takes["multi"]),
            optional_value_flags=frozenset(by_takes["optional"]),
            append_flags=frozenset(append),
            one_value_flags=frozenset(by_takes["one"]) | (TYPED_NAMES - frozenset(by_takes["none"])),
            aliases=aliases,
            options=specs,
        )

    def spec(self, name: str) -> OptionSpec | None:
        """The probed spec of a canonical option name, when the table has one."""
        for s in self.options:
            if any(f.startswith("--") and canonical_long(f) == name for f in s.flags):
                return s
        return None

    def canonical(self, flag: str) -> str:
        """The long, dashed name vLLM sees: ``--tensor_parallel_size`` → ``--tensor-parallel-size``,
        ``-tp`` → ``--tensor-parallel-size``, ``-cc.mode`` → ``--compilation-config.mode``."""
        if flag.startswith("--"):
            return canonical_long(flag)
        if flag.startswith("-"):
            base, dot, rest = flag.partition(".")
            long = self.aliases.get(base)
            if long is not None:
                return long + dot + rest
        return flag

    def split_negation(self, name: str) -> tuple[str, bool]:
        """``--no-enforce-eager`` → (``--enforce-eager``, True) for known boolean flags."""
        if name.startswith("--no-") and ("--" + name[5:]) in self.bool_flags:
            return "--" + name[5:], True
        return name, False

    def name_of(self, flag: str) -> str:
        """The canonical option a flag sets, negation removed."""
        return self.split_negation(self.canonical(flag))[0]

    def takes(self, name: str) -> Takes:
        if name in self.bool_flags:
            return "none"
        if name in self.multi_flags:
            return "multi"
        if name in self.optional_value_flags:
            return "optional"
        if "." in name:
            return "one"  # dotted config keys always carry a value
        if name in self.one_value_flags or name in self.aliases.values():
            return "one"
        return "unknown"


def canonical_long(flag: str) -> str:
    """``--tensor_parallel_size`` → ``--tensor-parallel-size``: vLLM rewrites ``_`` to ``-``
    between ``--`` and the first ``.``."""
    base, dot, rest = flag[2:].partition(".")
    return "--" + base.replace("_", "-") + dot + rest


BUILTIN = OptionTable(
    source="built-in",
    vllm_version=VLLM_ARGS_VERSION,
    bool_flags=BOOL_FLAGS,
    multi_flags=MULTI_FLAGS,
    optional_value_flags=OPTIONAL_VALUE_FLAGS,
    append_flags=APPEND_FLAGS,
    one_value_flags=ONE_VALUE_HINTS | TYPED_NAMES,
    aliases=dict(SHORT_ALIASES),
)


def canonical_flag(flag: str) -> str:
    """:meth:`OptionTable.canonical` with the built-in table."""
    return BUILTIN.canonical(flag)


def split_negation(name: str) -> tuple[str, bool]:
    """:meth:`OptionTable.split_negation` with the built-in table."""
    return BUILTIN.split_negation(name)
