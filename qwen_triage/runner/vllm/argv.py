"""Parse, edit and diff vLLM launch command lines.

Both entry points are understood::

    vllm serve MODEL [options]                                  (also: uv run vllm serve …,
                                                                  python -m vllm.entrypoints.cli.main serve …)
    python -m vllm.entrypoints.openai.api_server --model MODEL [options]

and, as vLLM's own ``FlexibleArgumentParser`` does (checked against 0.32.0):

* ``--flag value`` and ``--flag=value``;
* underscores and dashes alike in a long option's name (``--tensor_parallel_size``
  is ``--tensor-parallel-size``: vLLM rewrites ``_`` to ``-`` in everything
  between ``--`` and the first ``.``);
* boolean flags, with their ``--no-`` forms (``--enforce-eager`` /
  ``--no-enforce-eager``);
* short aliases (``-tp 2``, ``-pp``, ``-dp``, ``-q``, ``-O3``…);
* dotted config keys (``--compilation-config.mode 3``, ``-cc.mode=none``).

Which options are boolean, and which take several values, is not visible in an
argv: the tables below hold vLLM 0.32.0's (plus a few boolean flags of older
releases). An option in no table is taken to carry one value when the next
token is not an option, and to be a bare flag otherwise.

The parsed ``VllmLaunch`` keeps every token in order, so ``to_argv()`` gives
back the argv it came from, and an edit (``set_arg``/``remove_arg``) changes
only the option it names. ``diff_launches``/``render_diff`` show what a
relaunch changes, each change with its reason.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from qwen_triage.rulepack.actions import RemoveArg, SetArg, SetEnv, UnsetEnv

VLLM_ARGS_VERSION = "0.32.0"
DEFAULT_PORT = 8000

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
CLI_MODULES = ("vllm.entrypoints.cli.main", "vllm")


class VllmArgsError(ValueError):
    """The argv is not a vLLM launch, or an edit cannot be made."""


class EntryPoint(str, Enum):
    serve = "serve"  # vllm serve MODEL …
    api_server = "api_server"  # python -m vllm.entrypoints.openai.api_server --model MODEL …


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

# Names whose values are secrets: masked by render_diff.
_SECRET_ARGS = frozenset({"--api-key", "--hf-token"})
_SECRET_ENV = re.compile(r"(?i)(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|_KEY$)")

_NEG_NUMBER = re.compile(r"^-\d|^-\.\d")
_HUMAN_INT = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT])$")


def canonical_flag(flag: str) -> str:
    """The long, dashed name vLLM sees: ``--tensor_parallel_size`` → ``--tensor-parallel-size``,
    ``-tp`` → ``--tensor-parallel-size``, ``-cc.mode`` → ``--compilation-config.mode``."""
    if flag.startswith("--"):
        base, dot, rest = flag[2:].partition(".")
        return "--" + base.replace("_", "-") + dot + rest
    if flag.startswith("-"):
        base, dot, rest = flag.partition(".")
        long = SHORT_ALIASES.get(base)
        if long is not None:
            return long + dot + rest
    return flag


def _is_option(tok: str) -> bool:
    return tok.startswith("-") and tok != "-" and not _NEG_NUMBER.match(tok)


def _split_negation(name: str) -> tuple[str, bool]:
    """``--no-enforce-eager`` → (``--enforce-eager``, True) for known boolean flags."""
    if name.startswith("--no-") and ("--" + name[5:]) in BOOL_FLAGS:
        return "--" + name[5:], True
    return name, False


def _human_int(value: str) -> int:
    """vLLM's ``human_readable_int_or_auto``: 1k=1000, 1K=1024, 'auto'/-1 → -1."""
    v = value.strip()
    if v == "-1" or v.lower() == "auto":
        return -1
    m = _HUMAN_INT.match(v)
    if m:
        number, suffix = m.groups()
        if suffix.islower():
            return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix])
        if "." in number:
            raise ValueError(f"decimals are not allowed with binary suffix {suffix}: {value!r}")
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(v)


# --- the model --------------------------------------------------------------------------


class ArgToken(BaseModel):
    """One option (or positional) as written in the argv.

    ``name`` is the canonical long name (``--tensor-parallel-size``), ``written``
    the flag as the user wrote it (``-tp``, ``--tensor_parallel_size``);
    ``values`` is empty for a boolean flag; ``negated`` marks ``--no-NAME``.
    Positionals have ``style='positional'`` and name ``<model>`` (the model of
    ``vllm serve``) or ``<positional>``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    written: str
    values: tuple[str, ...] = ()
    style: Literal["space", "equals", "attached", "positional"] = "space"
    negated: bool = False

    def tokens(self) -> list[str]:
        if self.style == "positional":
            return list(self.values)
        if self.style == "equals":
            return [f"{self.written}={self.values[0]}", *self.values[1:]]
        if self.style == "attached":
            return [self.written + self.values[0], *self.values[1:]]
        return [self.written, *self.values]

    @property
    def is_positional(self) -> bool:
        return self.style == "positional"

    def display_value(self) -> str:
        """The setting this token makes, as a short string: ``4``, ``true``/``false``."""
        if self.style == "positional":
            return " ".join(self.values)
        if not self.values:
            return "false" if self.negated else "true"
        return " ".join(self.values)


_KNOWN = {
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
_KNOWN_NAMES = frozenset(_KNOWN.values()) | {"--model", "<model>"}


class VllmLaunch(BaseModel):
    """A parsed vLLM launch: the command prefix, and every argument in order.

    The typed views (``model``, ``port``, ``tensor_parallel_size``…) read the
    last occurrence, as argparse does; ``None`` means "not given" (vLLM's
    default applies). ``other_args`` are the arguments without a typed view, in
    order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    entry: EntryPoint
    prefix: tuple[str, ...] = Field(description="tokens before the arguments: ('vllm', 'serve') or ('python', '-m', API_SERVER_MODULE)")
    args: tuple[ArgToken, ...] = ()

    # -- lookups --------------------------------------------------------------------

    def find(self, flag: str) -> list[ArgToken]:
        """All tokens for this option (any spelling, alias or --no- form)."""
        name, _neg = _split_negation(canonical_flag(flag))
        if name in ("--model", "<model>"):
            return [a for a in self.args if a.name in ("--model", "<model>")]
        return [a for a in self.args if a.name == name]

    def last(self, flag: str) -> ArgToken | None:
        found = self.find(flag)
        return found[-1] if found else None

    def get(self, flag: str) -> str | None:
        """The value given for an option (last occurrence), or None."""
        tok = self.last(flag)
        return None if tok is None else tok.display_value()

    def _typed(self, field: str, strict: bool) -> Any:
        tok = self.last(_KNOWN[field])
        if tok is None:
            return None
        try:
            if field in ("enforce_eager", "disable_custom_all_reduce"):
                if tok.values:
                    raise ValueError(f"{tok.written} takes no value")
                return not tok.negated
            if not tok.values:
                raise ValueError(f"{tok.written} needs a value")
            v = tok.values[-1]
            if field in ("host", "dtype"):
                return v
            if field == "max_model_len":
                return _human_int(v)
            if field == "gpu_memory_utilization":
                return float(v)
            return int(v)
        except ValueError as e:
            if strict:
                raise ValueError(f"{tok.written}: {e}") from None
            return None

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        # model_dump() includes the typed views; let such a dump validate again.
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in cls.model_computed_fields}
        return data

    @model_validator(mode="after")
    def _check(self) -> VllmLaunch:
        for field in _KNOWN:
            self._typed(field, strict=True)
        if self.model is None:
            raise ValueError("no model given (vllm serve MODEL, or --model MODEL)")
        return self

    # -- typed views ------------------------------------------------------------------

    @computed_field  # type: ignore[prop-decorator]
    @property
    def model(self) -> str | None:
        tok = self.last("--model")
        return tok.values[-1] if tok is not None and tok.values else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def host(self) -> str | None:
        return self._typed("host", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def port(self) -> int | None:
        return self._typed("port", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tensor_parallel_size(self) -> int | None:
        return self._typed("tensor_parallel_size", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pipeline_parallel_size(self) -> int | None:
        return self._typed("pipeline_parallel_size", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def data_parallel_size(self) -> int | None:
        return self._typed("data_parallel_size", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def max_model_len(self) -> int | None:
        return self._typed("max_model_len", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gpu_memory_utilization(self) -> float | None:
        return self._typed("gpu_memory_utilization", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def dtype(self) -> str | None:
        return self._typed("dtype", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def enforce_eager(self) -> bool | None:
        return self._typed("enforce_eager", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def disable_custom_all_reduce(self) -> bool | None:
        return self._typed("disable_custom_all_reduce", False)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def other_args(self) -> list[ArgToken]:
        return [a for a in self.args if a.name not in _KNOWN_NAMES]

    @property
    def effective_port(self) -> int:
        return self.port if self.port is not None else DEFAULT_PORT

    @property
    def world_size(self) -> int:
        """Devices one replica uses: tp × pp (× dp for the whole launch, see ``data_parallel_size``)."""
        return (self.tensor_parallel_size or 1) * (self.pipeline_parallel_size or 1)

    # -- rendering --------------------------------------------------------------------

    def to_argv(self) -> list[str]:
        out = list(self.prefix)
        for a in self.args:
            out += a.tokens()
        return out

    def command_line(self) -> str:
        return shlex.join(self.to_argv())


# --- parsing ---------------------------------------------------------------------------


def _find_entry(argv: Sequence[str]) -> tuple[EntryPoint, int]:
    """(entry point, index of the first argument token)."""
    for i, tok in enumerate(argv):
        if os.path.basename(tok) == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return EntryPoint.serve, i + 2
        if tok == "-m" and i + 1 < len(argv):
            mod = argv[i + 1]
            if mod == API_SERVER_MODULE:
                return EntryPoint.api_server, i + 2
            if mod in CLI_MODULES and i + 2 < len(argv) and argv[i + 2] == "serve":
                return EntryPoint.serve, i + 3
        if tok.startswith("-m") and tok[2:] == API_SERVER_MODULE:
            return EntryPoint.api_server, i + 1
    raise VllmArgsError(
        "not a vLLM launch: expected `vllm serve MODEL …` or "
        f"`python -m {API_SERVER_MODULE} --model MODEL …`: {shlex.join(argv)!r}"
    )


def _takes(name: str) -> Literal["none", "one", "multi", "optional", "unknown"]:
    if name in BOOL_FLAGS:
        return "none"
    if name in MULTI_FLAGS:
        return "multi"
    if name in OPTIONAL_VALUE_FLAGS:
        return "optional"
    if "." in name:
        return "one"  # dotted config keys always carry a value
    if name in _KNOWN_NAMES or name in SHORT_ALIASES.values() or name in _ONE_VALUE_HINTS:
        return "one"
    return "unknown"


# Common value-taking options, so that a value that looks odd is still taken as one.
_ONE_VALUE_HINTS = frozenset(
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


def parse_vllm_argv(argv: Sequence[str]) -> VllmLaunch:
    """Parse a vLLM launch argv (with its command: ``vllm serve …`` or ``python -m …``)."""
    argv = list(argv)
    entry, start = _find_entry(argv)
    toks = argv[start:]
    args: list[ArgToken] = []
    have_model_pos = False
    i = 0
    while i < len(toks):
        tok = toks[i]
        i += 1
        if tok == "--":
            args.append(ArgToken(name="--", written="--"))
            args.extend(ArgToken(name="<positional>", written="", values=(t,), style="positional") for t in toks[i:])
            break
        if not _is_option(tok):
            if entry is EntryPoint.serve and not have_model_pos:
                args.append(ArgToken(name="<model>", written="", values=(tok,), style="positional"))
                have_model_pos = True
            else:
                args.append(ArgToken(name="<positional>", written="", values=(tok,), style="positional"))
            continue

        # -O3 / -O=3 / -Odecode: the optimization level, attached.
        if tok.startswith("-O") and not tok.startswith("--") and len(tok) > 2 and not tok.startswith("-O."):
            if tok[2] == "=":
                args.append(ArgToken(name="--optimization-level", written="-O", values=(tok[3:],), style="equals"))
            else:
                args.append(ArgToken(name="--optimization-level", written="-O", values=(tok[2:],), style="attached"))
            continue

        if "=" in tok:
            flag, value = tok.split("=", 1)
            name, neg = _split_negation(canonical_flag(flag))
            args.append(ArgToken(name=name, written=flag, values=(value,), style="equals", negated=neg))
            continue

        name, neg = _split_negation(canonical_flag(tok))
        kind = _takes(name)
        values: list[str] = []
        if kind == "one":
            if i >= len(toks) or _is_option(toks[i]):
                raise VllmArgsError(f"{tok} needs a value")
            values.append(toks[i])
            i += 1
        elif kind == "multi":
            while i < len(toks) and not _is_option(toks[i]):
                values.append(toks[i])
                i += 1
            if not values:
                raise VllmArgsError(f"{tok} needs at least one value")
        elif kind in ("optional", "unknown"):
            if i < len(toks) and not _is_option(toks[i]):
                values.append(toks[i])
                i += 1
        args.append(ArgToken(name=name, written=tok, values=tuple(values), negated=neg))

    try:
        return VllmLaunch(entry=entry, prefix=tuple(argv[:start]), args=tuple(args))
    except ValueError as e:
        raise VllmArgsError(str(e)) from None


_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def parse_command_line(cmd: str) -> tuple[VllmLaunch, dict[str, str]]:
    """Parse a shell command line; leading ``VAR=value`` assignments (and an ``env``
    in front of them) become the returned environment additions."""
    toks = shlex.split(cmd)
    env: dict[str, str] = {}
    i = 0
    if toks and toks[0] == "env":
        i = 1
    while i < len(toks) and _ASSIGN.match(toks[i]):
        k, v = toks[i].split("=", 1)
        env[k] = v
        i += 1
    return parse_vllm_argv(toks[i:]), env


# --- edits -----------------------------------------------------------------------------

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _rebuild(launch: VllmLaunch, args: Iterable[ArgToken]) -> VllmLaunch:
    try:
        return VllmLaunch(entry=launch.entry, prefix=launch.prefix, args=tuple(args))
    except ValueError as e:
        raise VllmArgsError(str(e)) from None


def set_arg(launch: VllmLaunch, flag: str, value: str | int | float | bool | Sequence[str] | None = None) -> VllmLaunch:
    """A new launch with ``flag`` set to ``value``; everything else kept as it was.

    The last occurrence is replaced in place (keeping how it was written: ``-tp``,
    ``--flag=value``); earlier duplicates are dropped; an option not yet given is
    appended. Boolean flags: ``value`` None/True/"true" → ``--flag``, False/"false"
    → ``--no-flag``. ``--model`` sets the model, wherever it was given.
    """
    name, neg = _split_negation(canonical_flag(flag))
    if not name.startswith("-"):
        raise VllmArgsError(f"not an option: {flag!r}")

    if name == "--model":
        if value is None or isinstance(value, bool) or not isinstance(value, str | int | float):
            raise VllmArgsError("--model needs one value")
        return _replace(launch, "--model", lambda old: old.model_copy(update={"values": (str(value),)}), lambda: _new_model(launch, str(value)))

    if name in BOOL_FLAGS:
        if isinstance(value, bool) or value is None:
            on = value is not False
        elif isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            on = value.lower() in _TRUE
        else:
            raise VllmArgsError(f"{name} is a boolean flag; got value {value!r}")
        if neg:
            on = not on

        def upd(old: ArgToken) -> ArgToken:
            if on and not old.negated and old.style != "equals":
                return old
            written = name if on else "--no-" + name[2:]
            return ArgToken(name=name, written=written, negated=not on)

        return _replace(launch, name, upd, lambda: ArgToken(name=name, written=name if on else "--no-" + name[2:], negated=not on))

    if value is None or value is True:
        if _takes(name) in ("one", "multi"):
            raise VllmArgsError(f"{name} needs a value")
        values: tuple[str, ...] = ()
    elif isinstance(value, bool):
        raise VllmArgsError(f"{name} is not a boolean flag")
    elif isinstance(value, str | int | float):
        values = (str(value),)
    else:
        values = tuple(str(v) for v in value)
        if len(values) > 1 and name not in MULTI_FLAGS:
            raise VllmArgsError(f"{name} takes one value")
        if not values:
            raise VllmArgsError(f"{name} needs a value")

    def upd_value(old: ArgToken) -> ArgToken:
        style = old.style
        if style in ("equals", "attached") and len(values) != 1:
            style = "space"
        if not values:
            style = "space"
        return old.model_copy(update={"values": values, "style": style, "negated": False})

    return _replace(launch, name, upd_value, lambda: ArgToken(name=name, written=name, values=values))


def _new_model(launch: VllmLaunch, model: str) -> list[ArgToken]:
    if launch.entry is EntryPoint.serve:
        return [ArgToken(name="<model>", written="", values=(model,), style="positional")]
    return [ArgToken(name="--model", written="--model", values=(model,))]


def _replace(launch: VllmLaunch, name: str, update, create) -> VllmLaunch:
    names = {"--model", "<model>"} if name == "--model" else {name}
    idx = [i for i, a in enumerate(launch.args) if a.name in names]
    args = list(launch.args)
    if idx:
        keep = idx[-1]
        args[keep] = update(args[keep])
        args = [a for i, a in enumerate(args) if i == keep or i not in idx]
        return _rebuild(launch, args)
    new = create()
    new = new if isinstance(new, list) else [new]
    if name == "--model":
        return _rebuild(launch, [*new, *args])  # the model goes first
    return _rebuild(launch, [*args, *new])


def remove_arg(launch: VllmLaunch, flag: str) -> VllmLaunch:
    """A new launch without ``flag`` (every occurrence, any spelling, both
    ``--x``/``--no-x``); unchanged when it was not given."""
    name, _neg = _split_negation(canonical_flag(flag))
    if name in ("--model", "<model>"):
        raise VllmArgsError("the model cannot be removed")
    return _rebuild(launch, [a for a in launch.args if a.name != name])


# --- actions and diffs ---------------------------------------------------------------


class Change(BaseModel):
    """One difference between two launches."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["command", "arg", "env"]
    name: str  # canonical option name, env var name, or "command"
    before: str | None  # None: not given / not set
    after: str | None
    reason: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def op(self) -> Literal["add", "remove", "change"]:
        if self.before is None:
            return "add"
        if self.after is None:
            return "remove"
        return "change"


class EditResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    launch: VllmLaunch
    env: dict[str, str]
    changes: list[Change]


def apply_action(
    launch: VllmLaunch, env: Mapping[str, str], action: SetArg | RemoveArg | SetEnv | UnsetEnv
) -> tuple[VllmLaunch, dict[str, str]]:
    """Apply one of the launch-editing actions of ``qwen_triage.rulepack.actions``."""
    env = dict(env)
    if isinstance(action, SetArg):
        return set_arg(launch, action.arg, action.value), env
    if isinstance(action, RemoveArg):
        return remove_arg(launch, action.arg), env
    if isinstance(action, SetEnv):
        env[action.name] = action.value
        return launch, env
    if isinstance(action, UnsetEnv):
        env.pop(action.name, None)
        return launch, env
    raise VllmArgsError(f"not a launch edit: {getattr(action, 'type', type(action).__name__)}")


def _action_key(action: Any) -> str:
    if isinstance(action, SetArg | RemoveArg):
        name, _ = _split_negation(canonical_flag(action.arg))
        return "--model" if name == "<model>" else name
    return action.name


def apply_edits(
    launch: VllmLaunch,
    env: Mapping[str, str],
    edits: Iterable[tuple[SetArg | RemoveArg | SetEnv | UnsetEnv, str]],
) -> EditResult:
    """Apply (action, reason) pairs in order; the changes carry their reasons."""
    new, new_env = launch, dict(env)
    reasons: dict[str, str] = {}
    for action, reason in edits:
        new, new_env = apply_action(new, new_env, action)
        key = _action_key(action)
        if reason and reason not in reasons.get(key, "").split("; "):
            reasons[key] = f"{reasons[key]}; {reason}" if key in reasons else reason
    return EditResult(launch=new, env=new_env, changes=diff_launches(launch, env, new, new_env, reasons))


def _settings(launch: VllmLaunch) -> dict[str, str]:
    """Canonical option → the value in effect (last occurrence; appended ones joined)."""
    out: dict[str, str] = {}
    extra = 0
    for a in launch.args:
        if a.name == "<positional>":
            extra += 1
            out[f"<positional {extra}>"] = a.display_value()
            continue
        key = "--model" if a.name == "<model>" else a.name
        if key in APPEND_FLAGS and key in out:
            out[key] = f"{out[key]}; {a.display_value()}"
        else:
            out.pop(key, None)  # re-insert: order of the last occurrence
            out[key] = a.display_value()
    return out


def diff_launches(
    before: VllmLaunch,
    before_env: Mapping[str, str],
    after: VllmLaunch,
    after_env: Mapping[str, str],
    reasons: Mapping[str, str] | None = None,
    default_reason: str = "",
) -> list[Change]:
    """The changes from one launch (argv + env) to another, by meaning, not spelling:
    ``-tp 2`` and ``--tensor_parallel_size=2`` are the same. ``reasons`` maps a
    canonical option name (``--tensor-parallel-size``, ``--model``) or an env
    name to the reason for its change."""
    reasons = reasons or {}
    changes: list[Change] = []
    if before.entry != after.entry or before.prefix != after.prefix:
        changes.append(
            Change(kind="command", name="command", before=shlex.join(before.prefix), after=shlex.join(after.prefix),
                   reason=reasons.get("command", default_reason))
        )
    b, a = _settings(before), _settings(after)
    for key, val in a.items():
        if b.get(key) != val:
            changes.append(Change(kind="arg", name=key, before=b.get(key), after=val, reason=reasons.get(key, default_reason)))
    for key, val in b.items():
        if key not in a:
            changes.append(Change(kind="arg", name=key, before=val, after=None, reason=reasons.get(key, default_reason)))
    for key in sorted(set(before_env) | set(after_env)):
        bv, av = before_env.get(key), after_env.get(key)
        if bv != av:
            changes.append(Change(kind="env", name=key, before=bv, after=av, reason=reasons.get(key, default_reason)))
    return changes


def _mask(change: Change, value: str | None) -> str | None:
    if value is None:
        return None
    secret = (change.kind == "arg" and change.name in _SECRET_ARGS) or (
        change.kind == "env" and _SECRET_ENV.search(change.name)
    )
    return "***" if secret and value else value


def render_diff(changes: Sequence[Change]) -> str:
    """One line per change, ``+`` added, ``-`` removed, ``~`` changed, each with its
    reason after ``#``. Secret values (``--api-key``, ``HF_TOKEN``…) are masked."""
    if not changes:
        return "(no changes)\n"
    rows: list[tuple[str, str]] = []
    for c in changes:
        bv, av = _mask(c, c.before), _mask(c, c.after)
        sym = {"add": "+", "remove": "-", "change": "~"}[c.op]
        if c.kind == "env":
            what = f"env {c.name}=" + (f"{bv} -> {av}" if c.op == "change" else (av if c.op == "add" else bv) or "")
        elif c.kind == "command":
            what = f"command: {bv} -> {av}"
        else:
            what = _arg_text(c.name, bv, av, c.op)
        rows.append((f"{sym} {what}", c.reason))
    width = max(len(r[0]) for r in rows)
    lines = [f"{left.ljust(width)}  # {reason}" if reason else left for left, reason in rows]
    return "\n".join(lines) + "\n"


def _arg_text(name: str, bv: str | None, av: str | None, op: str) -> str:
    def one(v: str | None) -> str:
        if name in BOOL_FLAGS:
            return name if v == "true" else "--no-" + name[2:]
        if name.startswith("<positional"):
            return shlex.quote(v or "")
        return f"{name} {shlex.quote(v) if v else ''}".rstrip()

    if name == "--model":
        return f"model: {bv} -> {av}" if op == "change" else f"model {av if op == 'add' else bv}"
    if op == "change":
        if name in BOOL_FLAGS:
            return f"{one(bv)} -> {one(av)}"
        return f"{name}: {bv} -> {av}"
    return one(av if op == "add" else bv)
