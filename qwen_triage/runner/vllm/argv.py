"""The vLLM launch model, and the parser from an argv to it.

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
* dotted config keys (``--compilation-config.mode 3``, ``-cc.mode=none``);
* ``--config FILE``: a YAML of options, which vLLM inserts before the command
  line's own (so the command line wins). They are kept apart from the argv
  (``config_args``) and count in the typed views: a tensor-parallel size set
  only in the file is the launch's tensor-parallel size.

Which flags take values comes from an :class:`~.options.OptionTable`: vLLM's
own, probed in the launch's interpreter (``probe.py``), or the built-in one.

The parsed ``VllmLaunch`` keeps every token in order, so ``to_argv()`` gives
back the argv it came from; ``edit.py`` changes one option at a time and
``diff.py`` shows what a relaunch changes.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field, model_validator

from qwen_triage.runner.vllm.options import (
    BUILTIN,
    MODEL_NAMES,
    TYPED_KINDS,
    TYPED_NAMES,
    TYPED_OPTIONS,
    OptionTable,
    is_option,
)
from qwen_triage.units import parse_count as human_int

DEFAULT_PORT = 8000
CONFIG_FLAG = "--config"

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
CLI_MODULES = ("vllm.entrypoints.cli.main", "vllm")


class VllmArgsError(ValueError):
    """The argv is not a vLLM launch, or an edit cannot be made."""


class EntryPoint(str, Enum):
    serve = "serve"  # vllm serve MODEL …
    api_server = "api_server"  # python -m vllm.entrypoints.openai.api_server --model MODEL …


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


class VllmLaunch(BaseModel):
    """A parsed vLLM launch: the command prefix, and every argument in order.

    The typed views (``model``, ``port``, ``tensor_parallel_size``…) read the
    last occurrence, as argparse does, and fall back to what the ``--config``
    file sets; ``None`` means "not given" (vLLM's default applies).
    ``other_args`` are the arguments without a typed view, in order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    entry: EntryPoint
    prefix: tuple[str, ...] = Field(description="tokens before the arguments: ('vllm', 'serve') or ('python', '-m', API_SERVER_MODULE)")
    args: tuple[ArgToken, ...] = ()
    config_args: tuple[ArgToken, ...] = Field(
        default=(), description="the options the --config file sets; the argv's own win over them"
    )
    _options: OptionTable = PrivateAttr(default_factory=lambda: BUILTIN)  # shared, not copied

    # -- lookups --------------------------------------------------------------------

    @property
    def options(self) -> OptionTable:
        """The option table this launch was parsed with (vLLM's own when probed)."""
        return self._options

    def find(self, flag: str) -> list[ArgToken]:
        """All tokens of the argv for this option (any spelling, alias or --no- form)."""
        return _find(self.args, self._options.name_of(flag))

    def last(self, flag: str) -> ArgToken | None:
        """The occurrence in effect: the argv's last, else the --config file's."""
        name = self._options.name_of(flag)
        found = _find(self.args, name) or _find(self.config_args, name)
        return found[-1] if found else None

    def get(self, flag: str) -> str | None:
        """The value in effect for an option (argv, then the --config file), or None."""
        tok = self.last(flag)
        return None if tok is None else tok.display_value()

    @property
    def config_file(self) -> str | None:
        tok = _last_config(self.args)
        return tok.values[-1] if tok is not None and tok.values else None

    def _typed(self, field: str, strict: bool) -> Any:
        tok = self.last(TYPED_OPTIONS[field])
        if tok is None:
            return None
        kind = TYPED_KINDS[field]
        try:
            if kind == "bool":
                if tok.values:
                    raise ValueError(f"{tok.written} takes no value")
                return not tok.negated
            if not tok.values:
                raise ValueError(f"{tok.written} needs a value")
            v = tok.values[-1]
            if kind == "str":
                return v
            if kind == "human_int":
                return human_int(v)
            if kind == "float":
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
        for field in TYPED_OPTIONS:
            self._typed(field, strict=True)
        if self.model is None:
            raise ValueError("no model given (vllm serve MODEL, --model MODEL, or model: in the --config file)")
        return self

    def with_args(self, args: Iterable[ArgToken]) -> VllmLaunch:
        """The same launch with other arguments (validated; the option table is kept).

        The --config file's options are kept while the argv names the same file."""
        args = tuple(args)
        cfg = _last_config(args)
        same_file = cfg is not None and cfg.values[-1:] == (self.config_file,)
        try:
            new = VllmLaunch(entry=self.entry, prefix=self.prefix, args=args,
                             config_args=self.config_args if same_file else ())
        except ValueError as e:
            raise VllmArgsError(str(e)) from None
        new._options = self._options
        return new

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
        return [a for a in self.args if a.name not in TYPED_NAMES]

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


def _find(args: Iterable[ArgToken], name: str) -> list[ArgToken]:
    if name in MODEL_NAMES:
        return [a for a in args if a.name in MODEL_NAMES]
    return [a for a in args if a.name == name]


def _last_config(args: Iterable[ArgToken]) -> ArgToken | None:
    found = [a for a in args if a.name == CONFIG_FLAG and a.values]
    return found[-1] if found else None


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



def _tokenize(toks: Sequence[str], table: OptionTable, entry: EntryPoint | None) -> list[ArgToken]:
    """Argument tokens to ArgTokens; ``entry`` None: options only (a --config file's)."""
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
        if not is_option(tok):
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
            name, neg = table.split_negation(table.canonical(flag))
            args.append(ArgToken(name=name, written=flag, values=(value,), style="equals", negated=neg))
            continue

        name, neg = table.split_negation(table.canonical(tok))
        kind = table.takes(name)
        values: list[str] = []
        if kind == "one":
            if i >= len(toks) or is_option(toks[i]):
                raise VllmArgsError(f"{tok} needs a value")
            values.append(toks[i])
            i += 1
        elif kind == "multi":
            while i < len(toks) and not is_option(toks[i]):
                values.append(toks[i])
                i += 1
            if not values:
                raise VllmArgsError(f"{tok} needs at least one value")
        elif kind in ("optional", "unknown"):
            if i < len(toks) and not is_option(toks[i]):
                values.append(toks[i])
                i += 1
        args.append(ArgToken(name=name, written=tok, values=tuple(values), negated=neg))
    return args


def parse_vllm_argv(
    argv: Sequence[str],
    *,
    options: OptionTable | None = None,
    config_args: Sequence[str] | None = None,
) -> VllmLaunch:
    """Parse a vLLM launch argv (with its command: ``vllm serve …`` or ``python -m …``).

    ``options``: vLLM's option table as probed (``probe.parse_launch`` passes it);
    the built-in table when None. ``config_args``: the options the ``--config``
    file sets, as vLLM's own ``load_config_file`` lists them; when None and the
    argv names a file, it is read here (``config_file.py``).
    """
    argv = list(argv)
    table = options or BUILTIN
    entry, start = _find_entry(argv)
    args = _tokenize(argv[start:], table, entry)
    from_file: list[ArgToken] = []
    cfg = _last_config(args)
    if cfg is not None:
        if config_args is None:
            from qwen_triage.runner.vllm.config_file import ConfigFileError, read_config_args

            try:
                config_args = read_config_args(cfg.values[-1], table)
            except ConfigFileError as e:
                raise VllmArgsError(str(e)) from None
        from_file = [a for a in _tokenize(list(config_args), table, None) if not a.is_positional]
    try:
        launch = VllmLaunch(entry=entry, prefix=tuple(argv[:start]), args=tuple(args), config_args=tuple(from_file))
    except ValueError as e:
        raise VllmArgsError(str(e)) from None
    launch._options = table
    return launch


_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def split_env_assignments(toks: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Leading ``VAR=value`` words (and an ``env`` in front of them): (the rest, the assignments)."""
    env: dict[str, str] = {}
    i = 0
    if toks and toks[0] == "env":
        i = 1
    while i < len(toks) and _ASSIGN.match(toks[i]):
        k, v = toks[i].split("=", 1)
        env[k] = v
        i += 1
    return list(toks[i:]), env


def parse_command_line(cmd: str) -> tuple[VllmLaunch, dict[str, str]]:
    """Parse a shell command line; leading ``VAR=value`` assignments (and an ``env``
    in front of them) become the returned environment additions."""
    argv, env = split_env_assignments(shlex.split(cmd))
    return parse_vllm_argv(argv), env
